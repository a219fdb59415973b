"""``export --format atif``: ATIF v1.8 trajectories, valid by the format's own models.

The conversation of ``test_agentrun_export.py`` (a subagent through ``as_tool``, a failing
tool, then a second turn), recorded with the real SDK Runner, is exported by the real
executable, from its tree and from its log alone; each line is loaded by the ``atif``
package's pydantic models (``Trajectory.model_validate``, which forbids unknown fields and
checks step order, agent-only fields and call ids), and the AgentUse fixture's own
session too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_agentrun_export import exported_twice

from sessiontape.storage.catalog.conversation import LedgerConversation
from sessiontape.storage.exports.atif import ATIF_VERSION, atif_trajectory

# The atif package needs Python 3.11 (pyproject's test extra installs it there).
Trajectory = pytest.importorskip("atif", reason="the atif package needs Python 3.11").Trajectory


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return exported_twice(tmp_path_factory, "atif")


def trajectories(world: dict[str, Any], read_from: str) -> list[Trajectory]:
    path: Path = world["base"] / f"{read_from}.jsonl"
    return [Trajectory.model_validate_json(line) for line in path.read_bytes().splitlines()]


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_each_line_is_a_valid_trajectory_of_the_runs_steps(world: dict[str, Any],
                                                           read_from: str) -> None:
    (porto,) = trajectories(world, read_from)
    assert porto.schema_version == ATIF_VERSION and porto.agent.name == "Guide"
    steps = [(s.source, s.message) for s in porto.steps]
    assert steps == [("user", "how do I get around?"), ("agent", "take the tram"),
                     ("user", "and at night?"), ("agent", "by tram")]
    first = porto.steps[1]
    assert first.tool_calls is not None and first.observation is not None
    assert [(c.function_name, c.arguments) for c in first.tool_calls] == [
        ("helper", {"input": "tram or bus?"}), ("fail", {"city": "Atlantis"})]
    helper, failed = first.observation.results
    assert helper.content is not None and "the tram is faster" in helper.content
    assert failed.extra == {"failed": True} and "no such city: Atlantis" in str(failed.content)
    assert porto.extra == {"user_id": "ann", "session_name": "porto", "origin": "sessiontape"}
    assert porto.final_metrics is not None and porto.final_metrics.total_steps == 4


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_the_subagent_is_an_embedded_trajectory_its_call_names(world: dict[str, Any],
                                                               read_from: str) -> None:
    (porto,) = trajectories(world, read_from)
    assert porto.steps[1].observation is not None
    helper = porto.steps[1].observation.results[0]
    assert helper.subagent_trajectory_ref is not None
    (ref,) = helper.subagent_trajectory_ref
    (sub,) = porto.subagent_trajectories or []
    assert sub.trajectory_id == ref.trajectory_id
    assert [(s.source, s.message) for s in sub.steps] == [("user", "tram or bus?"),
                                                          ("agent", "the tram is faster")]


def test_metrics_sum_to_what_usage_counts(world: dict[str, Any]) -> None:
    (porto,) = trajectories(world, "tree")
    (spent,) = world["spent"]
    trajectories_all = [porto, *(porto.subagent_trajectories or [])]
    metrics = [t.final_metrics for t in trajectories_all]
    assert sum(m.total_prompt_tokens or 0 for m in metrics if m) == spent["input_tokens"]
    assert sum(m.total_cost_usd or 0 for m in metrics if m) == pytest.approx(spent["cost"])
    summary = json.loads(world["tree"].stdout)
    assert (summary["format"], summary["steps"]) == ("atif", 4)


def test_a_session_agentuse_wrote_is_a_valid_trajectory(agentuse_fixture: Path) -> None:
    manager = next(agentuse_fixture.glob("agentuse/project/*/session/*-manager"))
    made = atif_trajectory(LedgerConversation(None, manager.name, manager, None, "agentuse"),
                           [])
    trajectory = Trajectory.model_validate(made)
    assert trajectory.steps[0].source == "system" and trajectory.subagent_trajectories
