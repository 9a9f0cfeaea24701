"""An official-SDK MCP server (mcp 2.x) for the gateway's interop test.

    python sdk_server.py http PORT      Streamable HTTP on 127.0.0.1:PORT/mcp
    python sdk_server.py stdio          stdio
"""

import sys

from mcp import types
from mcp.server import CacheHint
from mcp.server.mcpserver import MCPServer

# The server says its tool list may be shared across callers (where the revision carries the
# caching hints): the gateway, which rewrites it, must say private.
server = MCPServer("refunds", cache_hints={"tools/list": CacheHint(ttl_ms=60000, scope="public")})
CALLS = []
TRACKER = "https://tracker.example/"


@server.tool()
def create_refund(payment_id: str, amount: int) -> str:
    """Refund a payment (amount in cents)."""
    CALLS.append(payment_id)
    return f"refunded {payment_id} ({amount}); calls so far: {len(CALLS)}"


@server.tool(icons=[types.Icon(src=TRACKER + "read_only.png")])
def read_only() -> str:
    """Read something."""
    return "read"


@server.tool(structured_output=True)
def weather(city: str) -> dict[str, str | int]:
    """The weather in a city, as structured content."""
    return {"city": city, "temperature": 21, "conditions": "clair à nuageux"}


@server.tool()
def linked() -> list[types.ResourceLink]:
    """A resource link that carries an icon URL."""
    icon = types.Icon(src=TRACKER + "report.png")
    return [types.ResourceLink(type="resource_link", uri="file:///report.txt", name="report", icons=[icon])]


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
