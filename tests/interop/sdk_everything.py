"""The official Python SDK as the client, through `warden gateway --stdio`, to the reference
server `@modelcontextprotocol/server-everything` (npm) as the child.

    python sdk_everything.py STORE CONFIG SERVER_BIN

Lists tools, calls an allowed tool (echo), a denied one, an approval round trip (get-sum) and an
elicitation round trip (trigger-elicitation-request: the server asks the client mid-call, over
the same stdio, and the gateway relays both ways). Then getting started on this server (issue
31, item 8): `warden gateway scaffold` writes a skeleton denying every tool, `warden check
--upstream` reports its coverage and the hand-written document's, an alias typo is refused, and
the skeleton with one tool allowed governs the SDK client's calls.
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
    await getting_started(tools)


def actions_of(text):
    """The action names of a scaffolded document (one `  "mcp.…":` line each)."""
    return {line.strip()[1:-2] for line in text.splitlines() if line.startswith('  "mcp.everything.')}


async def getting_started(tools):
    folder = os.path.dirname(STORE)
    skeleton = os.path.join(folder, "scaffold.yaml")
    server = ["--", SERVER, "stdio"]
    written = warden("gateway", "scaffold", "--alias", "everything", "--out", skeleton, *server)
    check("scaffold writes a skeleton from the server's tools", written.returncode == 0 and "tool(s) of mcp-servers/everything" in written.stdout, written.stderr)
    text = open(skeleton, encoding="utf-8").read()
    scaffolded = actions_of(text)
    check("every tool the SDK client saw is an action of the skeleton", {f"mcp.everything.{t}" for t in tools} <= scaffolded, sorted(scaffolded))
    check("every one denied until decided", text.count("\n    decision: deny\n") == len(scaffolded), text)
    check("an effect template suggested from a required string (trigger-sampling-request)", 'effect: "trigger-sampling-request:{prompt}"' in text, text)
    check("none for a tool the server marks read-only (echo)", '"mcp.everything.echo":\n    # read-only, the server says' in text, text)
    count = len(scaffolded)
    covered = warden("check", skeleton, "--alias", "everything", *server)
    check(f"warden check --upstream: the skeleton covers {count} of {count}", covered.returncode == 0 and f"coverage: {count} of {count} tool(s)" in covered.stdout, covered.stdout + covered.stderr)
    partial = warden("check", CONFIG, "--alias", "everything", "--json", *server)
    report = json.loads(partial.stdout).get("coverage", {}) if partial.stdout else {}
    uncovered = set(report.get("uncovered_tools", []))
    check("the hand-written document: 4 covered, the rest named", partial.returncode == 0 and report.get("covered") == 4 and len(uncovered) == count - 4 and "get-env" in uncovered, report)
    typo = warden("check", CONFIG, "--alias", "everythin", *server)
    check("an alias that matches no action is refused (exit 1)", typo.returncode == 1 and "--alias everythin matches no action" in typo.stderr, typo.stderr)
    # The operator decides one tool: echo is allowed, everything else stays denied.
    lines = text.splitlines(keepends=True)
    start = lines.index('  "mcp.everything.echo":\n')
    at = next(i for i in range(start, len(lines)) if lines[i] == "    decision: deny\n")
    lines[at] = "    decision: allow\n"
    with open(skeleton, "w", encoding="utf-8") as file:
        file.writelines(lines)
    store = os.path.join(folder, "scaffold.redb")
    gateway = StdioServerParameters(
        command="warden",
        args=["gateway", "--stdio", "--alias", "everything", "--principal", "desktop-agent/ada",
              "--config", skeleton, "--store", store, "--", SERVER, "stdio"],
    )
    async with Client(gateway, mode="legacy") as client:
        kind, result = await call(client, "echo", {"message": "first governed call"})
        receipt = ((result.meta or {}) if kind == "result" else {}).get("dev.warden/receipt", {})
        check("the first governed call runs, with its receipt", kind == "result" and receipt.get("result") == "committed", result)
        kind, result = await call(client, "get-env", {})
        check("a tool the skeleton still denies is refused -41001", kind == "error" and getattr(result, "code", None) == -41001, result)


asyncio.run(main())
