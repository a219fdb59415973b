"""Wrap one agent run: it is recorded into the AgentUse tree, the SQLite store and the log.

    python examples/wrap_run.py            # offline, a scripted model
    OPENAI_API_KEY=... python examples/wrap_run.py gpt-4.1-mini
"""

import asyncio
import sys

from agents import Agent, RunConfig
from agents.testing import ModelStep, ScriptedModel, assistant_message

from sessiontape import Recorder


async def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else ScriptedModel(
        [ModelStep(output=[assistant_message("Hello! How can I help?", item_id="msg_1")])])
    agent = Agent(name="Greeter", instructions="Greet the user briefly.", model=model)
    rec = Recorder(user_id="john@example.com", session_name="example_wrap_run")
    result = await rec.run(agent, "Say hello.",
                           run_config=RunConfig(tracing_disabled=not isinstance(model, str)))
    print(result.final_output)
    print("AgentUse session:", rec.session_dir)
    print("JSONL log:       ", rec.log_path)


asyncio.run(main())
