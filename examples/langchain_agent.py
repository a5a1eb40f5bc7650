"""A LangChain agent whose tool returns 1.3 MB of orders: the model gets a 1 KB stub instead,
then queries the exact records it needs. Offline: a scripted model stands in for a real one."""

import re
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import cargohold
from cargohold.langchain import CargoholdMiddleware


def list_orders() -> list[dict[str, Any]]:
    """Every order."""
    return [{"id": i, "total": i * 1.5, "status": "paid" if i % 2500 else "refunded"}
            for i in range(30_000)]  # fmt: skip


class ScriptedModel(BaseChatModel):
    """Calls list_orders, queries the reference its stub names, answers from the rows."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        last = str(messages[-1].content)
        if ref := re.search(r"^\[cargohold\] (artifact://sha256/\w{64})", last):  # a stub
            ask = {"ref": ref[1], "expression": "[?status=='refunded'].id"}
            reply = AIMessage("", tool_calls=[{"name": "artifact_query", "args": ask, "id": "2"}])
        elif len(messages) > 1:  # the recovered segment: exact rows, verified by the store
            reply = AIMessage("Refunded orders: " + last.splitlines()[1])
        else:
            reply = AIMessage("", tool_calls=[{"name": "list_orders", "args": {}, "id": "1"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


with cargohold.open("memory://", tenant="acme", user="ana", session="app") as hold:
    guarded = CargoholdMiddleware(hold, check_window=False)  # a scripted model has no window
    agent = create_agent(ScriptedModel(), tools=[list_orders], middleware=[guarded])
    thread = {"configurable": {"thread_id": "orders-1"}}  # the thread is the session
    result = agent.invoke({"messages": [("user", "Which orders were refunded?")]}, thread)
    for message in result["messages"]:
        print(f"--- {message.type}\n{str(message.content)[:600]}")
    print("\n".join(hold.summary.lines()))
