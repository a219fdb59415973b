"""Hostile user ids, session names and agent names, through every writer and the Recorder.

Every name lands inside its root, two different raw names never share a log
file (owner records), the item store keeps raw names apart, and a second
``Recorder`` with the same hostile pair continues the same conversation.
Unicode normalisation twins (NFC and NFD of one name) are different names
everywhere: no layout normalises, so neither may share the other's file.
"""

from __future__ import annotations

import asyncio
import os
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted import final, model, read_session, read_turns, run_agent, store_items

from sessiontape import Recorder
from sessiontape.storage.agentuse_reader import load_session, scan_sessions
from sessiontape.storage.agentuse_writer import AgentUseSession
from sessiontape.storage.item_store import ItemStore
from sessiontape.storage.log_owners import log_owner
from sessiontape.storage.log_reader import SessionLogReader
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.replay_log import ReplayLog

CAFE_NFC = unicodedata.normalize("NFC", "Café")
CAFE_NFD = unicodedata.normalize("NFD", "Café")
assert CAFE_NFC != CAFE_NFD

HOSTILE = {
    "empty": "",
    "space": " ",
    "dots": "...",
    "dots-spaces": ". . .",
    "dotdot": "..",
    "traversal": "../../etc/passwd",
    "slash": "/",
    "separator": "a/b",
    "nul": "a\0b",
    "controls": "\x01\x1b[2J\x7f\t\n\r",
    "long": "x" * 10_000,
    "long-twin": "x" * 9_999 + "y",
    "nfc": CAFE_NFC,
    "nfd": CAFE_NFD,
    "bidi": "\u202eevil\u202c",
    "emoji": "🎉",
    "backslashes": "..\\..\\win",
}
NAMES = pytest.mark.parametrize("raw", list(HOSTILE.values()), ids=list(HOSTILE))


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, with every link resolved, is under ``root``."""
    return path.resolve().is_relative_to(root.resolve())


def every_file(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*")]


# -- the replay log writer ---------------------------------------------------------------


def test_every_hostile_pair_gets_its_own_log_inside_the_root(tmp_path: Path) -> None:
    """All 17 x 17 raw pairs: one file each, under the root, holding only its own lines;
    opening the pair again finds the same file."""
    root = tmp_path / "logs"
    paths: dict[tuple[str, str], Path] = {}
    for user in HOSTILE.values():
        for session in HOSTILE.values():
            with ReplayLog(user, session, root) as log:
                log.append({"kind": "user_message", "userInput": [user, session]})
            paths[(user, session)] = log.path
    assert len(set(paths.values())) == len(paths)
    for (user, session), path in paths.items():
        assert inside(path, root) and path.parent.parent == root
        assert log_owner(path) == {"user_id": user, "session_name": session}
        assert [e.data["userInput"] for e in SessionLogReader(path).entries()] == [[user, session]]
        assert ReplayLog(user, session, root).path == path
    assert all(inside(p, root) for p in every_file(root))


# Few characters, so that different raw names often sanitize to the same file name.
COLLIDING = st.text(alphabet=["a", "/", ".", " ", "_", "@", "\0", "é", "e", "\u0301", "\n"],
                    max_size=5)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(COLLIDING | st.text(max_size=40), COLLIDING), min_size=1,
                max_size=6, unique=True))
def test_distinct_pairs_never_share_a_log(tmp_path_factory: pytest.TempPathFactory,
                                          pairs: list[tuple[str, str]]) -> None:
    root = tmp_path_factory.mktemp("logs")
    first = {pair: ReplayLog(*pair, root).path for pair in pairs}
    assert len(set(first.values())) == len(pairs)
    for pair, path in first.items():
        assert inside(path, root) and path.parent.parent == root
        assert ReplayLog(*pair, root).path == path  # found again, in any order


# -- the AgentUse writer -----------------------------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(), max_size=300))
def test_any_agent_name_makes_one_session_inside_the_root(
        tmp_path_factory: pytest.TempPathFactory, name: str) -> None:
    """Lone surrogates included: the raw name is written and read back exactly."""
    root = tmp_path_factory.mktemp("agentuse")
    session = AgentUseSession.create(root, name, model="openai:gpt-4.1", project_root="/p",
                                     cwd="/p")
    session.add_message("task", system=[name]).add_part("text", text=name)
    assert session.directory.parent == root
    assert len(session.directory.name.encode()) < 200
    loaded = load_session(session.directory)
    assert loaded.info["agent"]["name"] == name
    assert loaded.messages[0].parts[0]["text"] == name
    assert [s.directory for s in scan_sessions(root).sessions] == [session.directory]


# -- the item store ----------------------------------------------------------------------


def test_item_store_keeps_every_hostile_raw_pair_apart(tmp_path: Path) -> None:
    pairs = [(u, s) for u in HOSTILE.values() for s in (CAFE_NFC, CAFE_NFD, "", "a\0b", "a/b")]

    async def main() -> dict[tuple[str, str], list[Any]]:
        async with ItemStore(tmp_path / "store.sqlite") as store:
            for user, session in pairs:
                await store.session(user, session).add_items(
                    [{"role": "user", "content": f"{user!r}/{session!r}"}])
            return {pair: await store.session(*pair).get_items() for pair in pairs}

    stored = asyncio.run(main())
    for (user, session), items in stored.items():
        assert items == [{"role": "user", "content": f"{user!r}/{session!r}"}]


# -- the Recorder, end to end ------------------------------------------------------------


def record_twice(user: str, session: str, agent_name: str) -> tuple[Recorder, Recorder, Any]:
    """Two turns of one conversation, each by a new Recorder; the second model's input."""
    second = model(final("second answer"))

    async def main() -> tuple[Recorder, Recorder]:
        first_rec = Recorder(user, session)
        await run_agent(first_rec, Agent(name=agent_name, model=model(final("first answer"))),
                        "first prompt", streamed=False)
        again = Recorder(user, session)
        await run_agent(again, Agent(name=agent_name, model=second), "second prompt",
                        streamed=True)
        for rec in (first_rec, again):
            await rec.flush()
            await rec.store.close()
        return first_rec, again

    first_rec, again = asyncio.run(main())
    return first_rec, again, second


@NAMES
def test_recorder_with_hostile_names_records_and_continues(isolated_env: Path, raw: str) -> None:
    """The name as user id, session name and agent name at once."""
    # Recorder(session_name="") means a fresh default session (as None does): not a
    # conversation a second Recorder could continue.
    user, session, agent_name = raw, raw or "session", raw
    first_rec, again, second_model = record_twice(user, session, agent_name)
    assert first_rec.errors == again.errors == 0
    # one conversation: the same log, the same AgentUse session, the whole history
    assert again.log_path == first_rec.log_path and again.session_dir == first_rec.session_dir
    assert [t.user_input for t in read_turns(again)] == ["first prompt", "second prompt"]
    loaded = read_session(again)
    assert loaded.info["agent"]["name"] == agent_name
    assert [m.info["user"]["prompt"]["task"] for m in loaded.messages] == [
        "first prompt", "second prompt"]
    assert len(asyncio.run(store_items(again))) == 4
    assert "first answer" in str(second_model.calls[0].input)  # the model saw the history
    # everything written is inside the roots
    skillet = SkilletPaths.resolve()
    data_root = Path(os.environ["XDG_DATA_HOME"])
    assert inside(again.log_path, skillet.logs_root)
    assert again.session_dir is not None and inside(again.session_dir, data_root)
    assert all(inside(p, isolated_env) for p in every_file(skillet.state, data_root))


def test_normalisation_twins_are_three_conversations(isolated_env: Path) -> None:
    """NFC ``Café``, NFD ``Café`` and ``Cafe`` sanitize to colliding log names but stay apart."""
    names = [CAFE_NFC, CAFE_NFD, "Cafe"]

    async def main() -> list[Recorder]:
        recorders = []
        for name in names:
            rec = Recorder(name, name)
            await run_agent(rec, Agent(name=name, model=model(final(f"answer {name}"))),
                            f"prompt {name}", streamed=False)
            await rec.flush()
            recorders.append(rec)
        return recorders

    recorders = asyncio.run(main())
    assert len({r.log_path for r in recorders}) == 3
    assert len({r.session_dir for r in recorders}) == 3
    for name, rec in zip(names, recorders, strict=True):
        assert rec.errors == 0
        assert [t.text for t in read_turns(rec)] == [f"answer {name}"]
        assert read_session(rec).info["agent"]["name"] == name
        assert asyncio.run(store_items(rec))[0] == {"role": "user", "content": f"prompt {name}"}


def test_a_pair_with_a_lone_surrogate_finds_its_own_log_again(tmp_path: Path) -> None:
    first = ReplayLog("ann\ud800", "s", tmp_path).path
    assert ReplayLog("ann\ud800", "s", tmp_path).path == first


@pytest.mark.parametrize("names", [("ann\ud800", "s"), ("ann", "s\udcff")])
def test_names_that_are_not_utf8_are_refused_up_front(names: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="UTF-8"):
        Recorder(*names)


def test_an_empty_session_name_is_refused() -> None:
    """"" is a mistake (an unset variable), not a name: None asks for a fresh default one."""
    with pytest.raises(ValueError, match="empty"):
        Recorder("ann", "")
    assert Recorder("ann").session_name.startswith("session_")
