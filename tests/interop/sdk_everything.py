"""The official Python SDK as the client, through `warden gateway --stdio`, to the reference
server `@modelcontextprotocol/server-everything` (npm) as the child.

    python sdk_everything.py STORE CONFIG SERVER_BIN

Lists tools, calls an allowed tool (echo), a denied one, an approval round trip (get-sum) and an
elicitation round trip (trigger-elicitation-request: the server asks the client mid-call, over
the same stdio, and the gateway relays both ways).
"""

import asyncio
import json
import os
import subprocess
import sys

from mcp import Client, StdioServerParameters, types

STORE, CONFIG, SERVER = sys.argv[1], sys.argv[2], sys.argv[3]


def check(label, condition, detail=""):
    print(("ok   " if condition else "FAIL ") + label + (f": {detail}" if detail and not condition else ""), flush=True)
    if not condition:
        sys.exit(1)


def warden(*args):
    env = dict(os.environ, WARDEN_STORE=STORE, WARDEN_CONFIG=CONFIG)
    return subprocess.run(["warden", *args], capture_output=True, text=True, env=env, check=False)


async def call(client, name, arguments):
    try:
        return ("result", await client.call_tool(name, arguments))
    except Exception as error:
        data = getattr(error, "error", None)
        return ("error", data if data is not None else error)


ELICITED = []


async def elicit(context, params):
    ELICITED.append(params.message)
    return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})


async def main():
    server = StdioServerParameters(
        command="warden",
        args=["gateway", "--stdio", "--alias", "everything", "--principal", "desktop-agent/ada",
              "--config", CONFIG, "--store", STORE, "--", SERVER, "stdio"],
    )
    async with Client(server, mode="legacy", elicitation_callback=elicit) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        check("tools/list is relayed (server-everything's tools)", {"echo", "get-sum"} <= tools, sorted(tools))
        kind, result = await call(client, "echo", {"message": "hello"})
        text = result.content[0].text if kind == "result" else str(result)
        check("an allowed tool runs (echo)", kind == "result" and "hello" in text, text)
        kind, result = await call(client, "get-sum", {"a": 5000, "b": 1})
        check("a denied tool is refused -41001", kind == "error" and getattr(result, "code", None) == -41001, result)
        kind, result = await call(client, "get-env", {})
        check("a tool the document does not list is refused -41001", kind == "error" and getattr(result, "code", None) == -41001, result)
        kind, result = await call(client, "get-sum", {"a": 500, "b": 1})
        data = getattr(result, "data", None) or {}
        check("get-sum over 100 asks for approval: -41002", getattr(result, "code", None) == -41002, result)
        approved = warden("approve", data["request_id"], "--by", "ops:bob", "--yes")
        check("a human approves with the CLI", approved.returncode == 0, approved.stderr)
        kind, result = await call(client, "get-sum", {"a": 500, "b": 1})
        text = result.content[0].text if kind == "result" else str(result)
        check("the identical call runs after the approval", kind == "result" and "501" in text, text)
        kind, result = await call(client, "get-sum", {"a": 500, "b": 1})
        check("and not twice: -41004", kind == "error" and getattr(result, "code", None) == -41004, result)
        if "trigger-elicitation-request" in tools:
            kind, result = await call(client, "trigger-elicitation-request", {})
            text = result.content[0].text if kind == "result" else str(result)
            check("an elicitation round trip passes through the gateway", kind == "result" and ELICITED and "Ada" in json.dumps(result.model_dump()), text)
        else:
            check("the server offers trigger-elicitation-request", False, sorted(tools))
    receipts = json.loads(warden("receipts", "--json").stdout)
    results = sorted((r["action"], r["result"]) for r in receipts)
    check("receipts for every intercepted call", ("mcp.everything.get-sum", "committed") in results and ("mcp.everything.echo", "committed") in results, results)


asyncio.run(main())
