// sessiontape serve: the usage charts (uPlot). Everything else is htmx in the markup.
"use strict";

const PALETTE = ["#4a90d9", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085",
                 "#d35400", "#2c3e50"];

// One day alone would be a range of zero: show the day before and after it.
const dayRange = (u, min, max) => min === max ? [min - 86400, max + 86400] : [min, max];

function drawCharts(holder) {
  const series = JSON.parse(holder.dataset.series);
  const days = series.days.map((day) => Date.parse(day + "T00:00:00Z") / 1000);
  for (const box of holder.querySelectorAll(".chart")) {
    const metric = box.dataset.metric;
    if (days.length === 0) {
      box.textContent = "No model call recorded yet.";
      continue;
    }
    const lines = series.models.map((model, i) => ({
      label: model || "(no model)",
      stroke: PALETTE[i % PALETTE.length],
      width: 2,
      points: { show: days.length < 60 },
      value: (u, v) => v == null ? "-" : metric === "cost" ? "$" + v.toFixed(4) : v.toLocaleString(),
    }));
    const data = [days, ...series.models.map((model) => series[metric][model])];
    new uPlot({ width: Math.max(280, box.clientWidth), height: 240,
                series: [{}, ...lines], scales: { x: { time: true, range: dayRange } } }, data, box);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const holder = document.getElementById("charts");
  if (holder && window.uPlot) drawCharts(holder);
});
