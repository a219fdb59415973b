"""An agent that reads its own past sessions through `sessiontape mcp`, recorded too.

The Agents SDK starts `sessiontape mcp` over stdio (MCPServerStdio); the agent searches
the sessions recorded before (here: one recorded first) and answers from what it found.

    python examples/past_sessions_mcp.py             # offline, a scripted model
    OPENAI_API_KEY=... python examples/past_sessions_mcp.py gpt-4.1-mini
"""

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

from agents import Agent, RunConfig
from agents.mcp import MCPServerStdio
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from sessiontape import Recorder


async def record_a_past_session(offline: bool) -> None:
    model = ScriptedModel([ModelStep(output=[assistant_message(
        "Lisbon in May: pack a light jacket for the evenings.", item_id="msg_past")])])
    agent = Agent(name="Travel helper", model=model)
    await Recorder(user_id="john@example.com", session_name="example_trip").run(
        agent, "What should I pack for Lisbon in May?",
        run_config=RunConfig(tracing_disabled=offline))


async def main() -> None:
    offline = len(sys.argv) < 2
    await record_a_past_session(offline)
    model = sys.argv[1] if not offline else ScriptedModel([
        ModelStep(output=[function_call("search_sessions", json.dumps({"query": "pack Lisbon"}),
                                        call_id="call_search")]),
        ModelStep(output=[assistant_message(
            "Last time you asked about Lisbon I said: pack a light jacket.", item_id="msg_1")]),
    ])
    beside = Path(sys.executable).with_name("sessiontape")  # this Python's install first
    command = str(beside) if beside.exists() else shutil.which("sessiontape") or "sessiontape"
    # the MCP client passes the server only a few variables unless told: give it ours, so
    # that it reads the same data directories (SKILLET_HOME, XDG_*) as the recorder
    async with MCPServerStdio(params={"command": command, "args": ["mcp"],
                                      "env": dict(os.environ)},
                              name="sessiontape", client_session_timeout_seconds=30) as past:
        agent = Agent(name="Memory", mcp_servers=[past], model=model,
                      instructions="Answer from the user's past sessions: search them first.")
        rec = Recorder(user_id="john@example.com", session_name="example_memory")
        result = await rec.run(agent, "What did you tell me about Lisbon?",
                               run_config=RunConfig(tracing_disabled=offline))
    print(result.final_output)
    print("JSONL log:", rec.log_path)


asyncio.run(main())
