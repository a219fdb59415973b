"""Keep your own Runner call: pass the recorder's hooks and session.

    python examples/own_runner.py
"""

import asyncio

from agents import Agent, RunConfig, Runner
from agents.testing import ModelStep, ScriptedModel, assistant_message

from sessiontape import Recorder


async def main() -> None:
    agent = Agent(name="Assistant", model=ScriptedModel(
        [ModelStep(output=[assistant_message("Recorded through my own Runner call.",
                                             item_id="msg_1")])]))
    rec = Recorder(session_name="example_own_runner")
    result = await Runner.run(agent, "Hi!", hooks=rec.hooks, session=rec.session,
                              run_config=RunConfig(tracing_disabled=True))
    print(result.final_output)
    print("items in the store:", len(await rec.session.get_items()))
    print("AgentUse session:", rec.session_dir)


asyncio.run(main())
