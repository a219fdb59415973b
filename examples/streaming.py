"""A streamed run is recorded as its events are consumed.

    python examples/streaming.py
"""

import asyncio

from agents import Agent, RunConfig
from agents.testing import ModelStep, ScriptedModel, assistant_message

from sessiontape import Recorder


async def main() -> None:
    model = ScriptedModel([ModelStep(output=[assistant_message(
        "Streaming works: each chunk becomes a text step in the log.", item_id="msg_1")])])
    agent = Agent(name="Streamer", model=model)
    rec = Recorder(session_name="example_streaming")
    result = rec.run_streamed(agent, "Stream something.",
                              run_config=RunConfig(tracing_disabled=True))
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            print(event.data.delta, end="", flush=True)
    print("\nJSONL log:", rec.log_path)


asyncio.run(main())
