"""Plain Python tools, no framework: a heavy result comes back as its stub (the exact bytes kept
in the store), a small one as the value itself, and a read brings back exactly what is asked."""

import asyncio
import os

import cargohold

# The bare decorator's hold (below) is the configured one, and a configured hold needs a session:
# CARGOHOLD_SESSION or `session` in cargohold.toml (there is no default: unrelated runs never
# share a scope).
os.environ.setdefault("CARGOHOLD_SESSION", "tools-demo")

hold = cargohold.open("memory://", tenant="acme", user="ana", session="run-1")


@cargohold.offload_tool(hold)  # sync or async, any function that returns a tool's result
def read_log(service: str) -> str:
    """Today's log of a service: 650 KB."""
    levels = ["ERROR" if i % 4000 == 0 else "INFO" for i in range(20_000)]
    return "\n".join(f"00:{i % 60:02d} {lv} {service} request {i}" for i, lv in enumerate(levels))


@cargohold.offload_tool(hold, tool="service_status")
async def status(service: str) -> dict[str, str]:
    """A small answer: the value itself comes back."""
    return {"service": service, "status": "degraded"}


@cargohold.offload_tool  # no hold: the configured store and scope, opened at the first call
def config_dump() -> str:
    return "key = value\n" * 5_000


stub = read_log("billing")  # what goes into the conversation instead of the log
print(stub)
print(asyncio.run(status("billing")))
answer = hold.call_tool("artifact_grep", {"ref": stub.split()[1], "pattern": "ERROR"})
print(answer.text)  # the matching lines, verified against the stored bytes
print(config_dump().splitlines()[0])  # later: CARGOHOLD_SESSION=tools-demo cargohold read <ref>
print("\n".join(hold.summary.lines()))
hold.close()
