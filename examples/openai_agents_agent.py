"""An OpenAI Agents SDK agent whose tool returns 1.3 MB of orders: the model gets a stub instead,
then queries the exact records it needs. Offline: the SDK's ScriptedModel stands in for a model."""

import asyncio
import re
from typing import Any

from agents import Agent, Runner, SQLiteSession, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

import cargohold
from cargohold.openai_agents import AgentsAdapter


@function_tool
def list_orders() -> list[dict[str, Any]]:
    """Every order."""
    return [{"id": i, "total": i * 1.5, "status": "paid" if i % 2500 else "refunded"}
            for i in range(30_000)]  # fmt: skip


def query(call: ModelCall) -> Any:  # the stub names the reference: ask for what is needed
    ref = re.search(r"artifact://sha256/\w{64}", call.input[-1]["output"])[0]
    ask = {"ref": ref, "expression": "[?status=='refunded'].id"}
    return [function_call("artifact_query", ask, call_id="2")]


def answer(call: ModelCall) -> Any:  # the recovered segment: exact rows, verified by the store
    return [assistant_message("Refunded orders: " + call.input[-1]["output"].splitlines()[1])]


async def main() -> None:
    steps = [[function_call("list_orders", {}, call_id="1")], ModelStep.respond(query)]
    model = ScriptedModel([*steps, ModelStep.respond(answer)])
    async with cargohold.open("memory://", tenant="acme", user="ana", session="app") as hold:
        cargo = AgentsAdapter(hold)
        tools = [*cargo.wrap_tools([list_orders]), *cargo.read_tools()]
        agent = Agent(name="analyst", model=model, tools=tools)
        session = SQLiteSession("orders-1")  # the SDK session is the cargohold session
        config = cargo.run_config(session, check_window=False, tracing_disabled=True)  # no window
        result = await Runner.run(agent, "Which refunds?", session=session, run_config=config)
        for item in await session.get_items():  # what the model was sent of each tool call
            if item.get("type") == "function_call_output":
                print(f"---\n{item['output'][:600]}")
        print(result.final_output)
        print("\n".join(hold.summary.lines()))


asyncio.run(main())
