"""The official Python SDK (mcp 2.x) as the client, through `warden gateway`.

    python sdk_client.py URL UPSTREAM_URL STORE CONFIG
    python sdk_client.py stdio SERVER_PY STORE CONFIG

Lists tools, calls an allowed tool, a denied tool, and an approval round trip (the approval
granted with the `warden` CLI), and checks what the upstream ran; then what the gateway
rewrites as the SDK's typed results show it (issue 31, item 4): the tool list without icon
URLs and private, where the server itself says public; a result's resource link without its
icon; a result's structuredContent bound to its receipt. Prints one line per check and exits
non-zero at the first failure.
"""

import asyncio
import hashlib
import json
import os
import subprocess
import sys

from mcp import Client, StdioServerParameters

TARGET, UPSTREAM, STORE, CONFIG = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]


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
                  "--config", CONFIG, "--store", STORE, "--", sys.executable, UPSTREAM, "stdio"],
        )
        direct = StdioServerParameters(command=sys.executable, args=[UPSTREAM, "stdio"])
    else:
        server, direct = TARGET, UPSTREAM
    async with Client(direct) as upstream:
        listed = await upstream.list_tools()
        by_name = {tool.name: tool for tool in listed.tools}
        icons = by_name["read_only"].icons or []
        check("(the server itself lists an icon URL)", [icon.src for icon in icons] == ["https://tracker.example/read_only.png"], icons)
        server_scope = listed.cache_scope
    async with Client(server) as client:
        tools = await client.list_tools()
        names = sorted(tool.name for tool in tools.tools)
        check("tools/list is relayed", names == ["create_refund", "linked", "read_only", "weather"], names)
        read_only = next(tool for tool in tools.tools if tool.name == "read_only")
        check("the tool's icon URL never reaches the client", read_only.icons is None, read_only.icons)
        check(f"the rewritten list is private (the server said {server_scope})", tools.cache_scope == "private", tools.cache_scope)
        kind, result = await call(client, "linked", {})
        link = result.content[0] if kind == "result" else result
        check("a result's resource link loses its icon URL", kind == "result" and link.type == "resource_link" and link.icons is None and link.uri == "file:///report.txt", link)
        kind, result = await call(client, "weather", {"city": "Zürich"})
        receipt = ((result.meta or {}) if kind == "result" else {}).get("dev.warden/receipt", {})
        canonical = json.dumps(result.structured_content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
        check("structuredContent is bound to the receipt (CallToolResult.meta)", receipt.get("result_sha256") == digest, (receipt, canonical))
        weather_receipt = receipt.get("receipt_id")
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
    stored = [r for r in receipts if r.get("receipt_id") == weather_receipt]
    check("the stored receipt holds the same result_sha256", len(stored) == 1 and stored[0].get("result_sha256") == digest, stored)
    chain = warden("receipts", "--verify-chain", "--json")
    check("and the chain verifies", chain.returncode == 0 and json.loads(chain.stdout)["ok"] is True, chain.stdout)


asyncio.run(main())
