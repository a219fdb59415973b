"""Every recorded session a regression test: sessiontape's pytest plugin.

Run with pytest (``python -m pytest examples/replay_test.py``) or as a script. A module
fixture records a conversation with the agent as it was (in a real project: the sessions
recorded in production or by hand, kept with the tests, SKILLET_HOME and XDG_DATA_HOME
pointing at them); the tests replay it with the agent as it is now. The model answers
from the recording, so they run offline and in milliseconds.
"""

import asyncio
import os
import sys
import tempfile

import pytest
from agents import Agent, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from sessiontape import Recorder


@function_tool
def opening_hours(place: str) -> str:
    """When a place is open."""
    return f"{place}: 10:00-18:00"


def trip_agent() -> Agent:
    """The agent under test (a real one has a real model; the replay never asks it)."""
    return Agent(name="Planner", instructions="Plan museum visits.", tools=[opening_hours],
                 model=ScriptedModel([
                     ModelStep(output=[function_call("opening_hours", '{"place": "Louvre"}',
                                                     call_id="call_1")]),
                     ModelStep(output=[assistant_message("Go at 10:00, it opens then.",
                                                         item_id="msg_1")])]))


@pytest.fixture(scope="module", autouse=True)
def recordings() -> None:
    """A recording to replay, in a data directory of its own."""
    home = tempfile.mkdtemp(prefix="sessiontape-example-")
    for variable in ("SKILLET_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        os.environ[variable] = os.path.join(home, variable.lower())
    asyncio.run(Recorder(user_id="ann", session_name="louvre").run(
        trip_agent(), "When should I visit the Louvre?"))


def test_the_planner_still_answers_as_recorded(replay_session):
    report = replay_session("louvre", trip_agent, user="ann")
    assert report.identical, report.explain()


@pytest.mark.sessiontape_replay("louvre", agent=trip_agent, user="ann")
def test_the_planner_marked():
    pass  # the plugin replays the session after the test and fails on a divergence


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider",
                          "-W", "ignore::pytest.PytestAssertRewriteWarning"]))
