"""Each final answer is in the replay log twice, in ``text`` steps and in ``final_result``,
because skilled_crew 1.0.11's readers each show only one of the two (issue 23, item 13;
docs/formats.md, "What the original readers require"). Paths are in skilled_crew's
repository at b29115f, under packages/_skillet_agent.

skilled_crew writes both itself (src/agent_runner/agent_runner.ts: ``_runNonStreaming``
writes a ``text`` step with the final output, ``_runStreaming`` one per chunk, then both
``appendFinalResult``), and its readers split them:

- ``run`` and ``chat`` replay the log before the prompt (src/commands/cli_chat_helper.ts
  ``replaySessionTty``: src/session/session_log_reader.ts ``iterateTurns``, then
  ``displayTurn``): with ``-s`` they print each ``text`` step and not ``finalResult``;
  without, only ``finalResult.text``.
- ``log stream`` (src/commands/cli_log_helper.ts ``_drainFile``, ``_printEntry``) prints
  only ``user_message`` and ``final_result`` lines: ``agent> finalResult.text``.
- the web chat replays a log as ``chunk`` frames and draws the answer from ``text`` chunks,
  as ``-s`` does (docs/sse-data-flow.md, and ../_skillet_docsite/content/web-client/api.mdx;
  the web client's own code is not in the repository).

The readers below follow those rules on the raw lines.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent
from scripted import call, final, model, run_way, square, tools_step

from sessiontape import Recorder

Line = dict[str, Any]


def skilled_crew_turns(lines: list[Line]) -> list[tuple[list[Line], Line]]:
    """``SessionLogReader.iterateTurns`` (session_log_reader.ts): a ``user_message`` opens a
    turn, ``step`` lines add their ``stepResult``, a ``final_result`` closes it with its
    ``finalResult``; a turn left open gets ``{text: its text steps joined}``. Other kinds are
    skipped."""
    turns: list[tuple[list[Line], Line]] = []
    steps: list[Line] | None = None
    for line in lines:
        if line["kind"] == "user_message":
            if steps is not None:
                turns.append((steps, {"text": joined_text(steps)}))
            steps = []
        elif line["kind"] == "step" and steps is not None:
            steps.append(line["stepResult"])
        elif line["kind"] == "final_result" and steps is not None:
            turns.append((steps, line["finalResult"]))
            steps = None
    if steps is not None:
        turns.append((steps, {"text": joined_text(steps)}))
    return turns


def joined_text(steps: list[Line]) -> str:
    return "".join(step["text"] for step in steps if step["type"] == "text")


def replay_shows(lines: list[Line], streaming: bool) -> list[str]:
    """What ``CliChatHelper.displayTurn`` (cli_chat_helper.ts) prints as each turn's answer:
    with ``-s`` every ``text`` step's ``text`` and nothing of ``finalResult``; without,
    ``finalResult.text`` only (``text`` steps are skipped)."""
    return [joined_text(steps) if streaming else str(result.get("text", ""))
            for steps, result in skilled_crew_turns(lines)]


def log_stream_shows(lines: list[Line]) -> list[str]:
    """What ``skilled_crew log stream`` (cli_log_helper.ts) prints after ``agent>``: each
    ``final_result`` line's ``finalResult.text`` (``step`` lines are skipped)."""
    return [str(line["finalResult"].get("text"))
            for line in lines if line["kind"] == "final_result"]


@pytest.mark.parametrize("way", ["rec.run", "rec.run_streamed", "Runner.run",
                                 "Runner.run_streamed"])
def test_every_skilled_crew_reader_shows_each_answer_once(way: str) -> None:
    rec = Recorder(session_name=f"copies-{way}")
    answers = ["Nine, as asked.", "Goodbye for now."]
    first = Agent(name="A", tools=[square], model=model(
        tools_step(call("square", {"n": 3})), final(answers[0])))
    assert asyncio.run(run_way(way, rec, first, "square 3?")) == answers[0]
    second = Agent(name="A", model=model(final(answers[1])))
    assert asyncio.run(run_way(way, rec, second, "bye")) == answers[1]
    raw = rec.log_path.read_text(encoding="utf-8")
    lines = [json.loads(line) for line in raw.splitlines()]

    assert replay_shows(lines, streaming=True) == answers      # run -s, chat -s, web chat
    assert replay_shows(lines, streaming=False) == answers     # run, chat
    assert log_stream_shows(lines) == answers                  # log stream
    # exactly the two copies: one text step and the final_result, nowhere else in the log
    assert [raw.count(json.dumps(answer)) for answer in answers] == [2, 2]
