"""The pytest plugin: every recorded session a regression test (``pip install sessiontape``).

Registered through the ``pytest11`` entry point, so any project that installs sessiontape
has it. Two ways to use it (docs/replay.md; ``examples/replay_test.py``):

* the fixture ``replay_session``: ``replay_session(name, agent, user=None, turn=None,
  recorded_tools=False)`` replays the recorded session ``name`` with ``agent`` (an
  ``Agent``, a function that returns one, or a ``"module:attr"`` spec) and returns the
  :class:`~sessiontape.replay.ReplayReport`: ``assert report.identical, report.explain()``;
* the marker ``@pytest.mark.sessiontape_replay(name, agent=..., user=None, turn=None,
  recorded_tools=False)``: after the test's own body, the session is replayed and the
  test fails with the divergences when it is not identical.

The sessions are read where the environment says (``SKILLET_HOME``, ``XDG_DATA_HOME``):
point them at recordings kept with the tests. Nothing is imported until a test uses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .replay import ReplayReport

__all__ = ["MARKER", "Replay", "replay_session"]

MARKER = "sessiontape_replay"
Replay = Callable[..., "ReplayReport"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(name, agent, user=None, turn=None, recorded_tools=False): "
                   "replay the recorded session NAME with AGENT after the test and fail "
                   "on any divergence (sessiontape)")


def _agent(agent: Any) -> Any:
    """An Agent from an Agent, a function that returns one, or a "module:attr" spec."""
    from agents import Agent

    if isinstance(agent, str):
        from .cli.agent_loader import load_agent

        return load_agent(agent)
    return agent if isinstance(agent, Agent) else agent()


def _replay(name: str, agent: Any, *, user: str | None = None, turn: int | None = None,
            recorded_tools: bool = False) -> ReplayReport:
    from .replay import replay_session as replay
    from .storage.catalog.index import Catalog
    from .storage.paths import Locations

    with Catalog() as catalog:
        catalog.refresh(Locations.resolve())
        found = catalog.find(name, catalog.user(user) if user is not None else None)
    return asyncio.run(replay(found, _agent(agent), turn=turn,
                              recorded_tools=recorded_tools))


@pytest.fixture
def replay_session() -> Replay:
    """``replay_session(name, agent, user=None, turn=None, recorded_tools=False)``: the
    :class:`~sessiontape.replay.ReplayReport` of the recorded session replayed."""
    return _replay


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield  # the test's own body (its failure passes through, unreplayed)
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return
    if not marker.args or "agent" not in marker.kwargs:
        pytest.fail(f"@pytest.mark.{MARKER} needs the session's name and agent=...",
                    pytrace=False)
    options = {key: value for key, value in marker.kwargs.items() if key != "agent"}
    report = _replay(marker.args[0], marker.kwargs["agent"], **options)
    if not report.identical:
        pytest.fail(report.explain(), pytrace=False)
