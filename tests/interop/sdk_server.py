"""An official-SDK MCP server (mcp 2.x) for the gateway's interop test.

    python sdk_server.py http PORT      Streamable HTTP on 127.0.0.1:PORT/mcp
    python sdk_server.py stdio          stdio
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("refunds")
CALLS = []


@server.tool()
def create_refund(payment_id: str, amount: int) -> str:
    """Refund a payment (amount in cents)."""
    CALLS.append(payment_id)
    return f"refunded {payment_id} ({amount}); calls so far: {len(CALLS)}"


@server.tool()
def read_only() -> str:
    """Read something."""
    return "read"


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
