"""The official Python SDK (mcp 2.x) as the client, through `warden gateway`.

    python sdk_client.py URL_OR_STDIO STORE CONFIG [WARDEN ARGS...]

Lists tools, calls an allowed tool, a denied tool, and an approval round trip (the approval
granted with the `warden` CLI), and checks what the upstream ran. Prints one line per check and
exits non-zero at the first failure.
"""

import asyncio
import json
import os
import subprocess
import sys

from mcp import Client, StdioServerParameters

TARGET, STORE, CONFIG = sys.argv[1], sys.argv[2], sys.argv[3]


def check(label, condition, detail=""):
    print(("ok   " if condition else "FAIL ") + label + (f": {detail}" if detail and not condition else ""), flush=True)
    if not condition:
        sys.exit(1)


def warden(*args):
    env = dict(os.environ, WARDEN_STORE=STORE, WARDEN_CONFIG=CONFIG)
    return subprocess.run(["warden", *args], capture_output=True, text=True, env=env, check=False)


async def call(client, name, arguments):
    try:
        result = await client.call_tool(name, arguments)
        return ("result", result)
    except Exception as error:  # the SDK raises McpError for a JSON-RPC error
        data = getattr(error, "error", None)
        return ("error", data if data is not None else error)


async def main():
    if TARGET == "stdio":
        server = StdioServerParameters(
            command="warden",
            args=["gateway", "--stdio", "--alias", "acme", "--principal", "sdk-agent/ada",
                  "--config", CONFIG, "--store", STORE, "--", sys.executable, sys.argv[4], "stdio"],
        )
    else:
        server = TARGET
    async with Client(server) as client:
        tools = await client.list_tools()
        names = sorted(tool.name for tool in tools.tools)
        check("tools/list is relayed", names == ["create_refund", "read_only"], names)
        kind, result = await call(client, "read_only", {})
        check("an allowed read runs", kind == "result" and not result.is_error, result)
        kind, result = await call(client, "create_refund", {"payment_id": "p1", "amount": 100})
        text = result.content[0].text if kind == "result" else str(result)
        check("an allowed refund runs once", kind == "result" and "calls so far: 1" in text, text)
        kind, result = await call(client, "create_refund", {"payment_id": "p1", "amount": 100})
        check("the same refund again is refused -41004", kind == "error" and getattr(result, "code", None) == -41004, result)
        kind, result = await call(client, "create_refund", {"payment_id": "p2", "amount": 5000000})
        check("a denied refund is refused -41001", kind == "error" and getattr(result, "code", None) == -41001, result)
        kind, result = await call(client, "create_refund", {"payment_id": "p3", "amount": 90000})
        code = getattr(result, "code", None)
        data = getattr(result, "data", None) or {}
        check("an approval is asked for: -41002", kind == "error" and code == -41002 and "request_id" in data, result)
        request_id = data["request_id"]
        kind, result = await call(client, "create_refund", {"payment_id": "p3", "amount": 90000})
        again = (getattr(result, "data", None) or {}).get("request_id")
        check("re-sent while pending: the same request", again == request_id, result)
        approved = warden("approve", request_id, "--by", "ops:bob", "--yes")
        check("a human approves with the CLI", approved.returncode == 0, approved.stderr)
        kind, result = await call(client, "create_refund", {"payment_id": "p3", "amount": 90000})
        text = result.content[0].text if kind == "result" else str(result)
        check("the identical call runs after the approval", kind == "result" and "refunded p3" in text, text)
    receipts = json.loads(warden("receipts", "--json").stdout)
    committed = [r for r in receipts if r["result"] == "committed" and r["action"] == "mcp.acme.create_refund"]
    check("two committed refund receipts", len(committed) == 2, receipts)


asyncio.run(main())
