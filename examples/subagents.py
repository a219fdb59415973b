"""A subagent (Agent.as_tool) is recorded as a nested AgentUse session, with no extra wiring.

    python examples/subagents.py
"""

import asyncio

from agents import Agent, RunConfig, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from sessiontape import Recorder


@function_tool
def count_files(directory: str) -> int:
    """Count the files in a directory."""
    return 4


async def main() -> None:
    helper = Agent(name="Helper", tools=[count_files], model=ScriptedModel([
        ModelStep(output=[function_call("count_files", {"directory": "."}, call_id="c2")],
                  response_id="h1"),
        ModelStep(output=[assistant_message("There are 4 files.", item_id="m2")], response_id="h2"),
    ]))
    manager = Agent(name="Manager", tools=[helper.as_tool("ask_helper", "Delegate to the helper")],
                    model=ScriptedModel([
                        ModelStep(output=[function_call("ask_helper", {"input": "Count files"},
                                                        call_id="c1")], response_id="m1"),
                        ModelStep(output=[assistant_message("The helper counted 4 files.",
                                                            item_id="m3")], response_id="m3"),
                    ]))
    rec = Recorder(session_name="example_subagents")
    result = await rec.run(manager, "How many files are there?",
                           run_config=RunConfig(tracing_disabled=True))
    print(result.final_output)
    for child in (rec.session_dir / "subagent").iterdir():
        print("subagent session:", child)


asyncio.run(main())
