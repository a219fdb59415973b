"""A small MCP server for the recorder's MCP tests, run over stdio as a subprocess.

``python tests/mcp_server.py`` serves these tools with mcp 2's ``MCPServer`` (FastMCP,
renamed), over stdio only (no network):

- ``add(a, b)``: the sum, as one text block;
- ``pair(word)``: two text blocks (a result with more than one content item);
- ``fail(reason)``: raises ``ToolError(reason)``: the server answers with an error result
  (``isError: true``) whose text is ``Error executing tool fail: <reason>``;
- ``crash()``: raises ``ValueError``: an error result too, whose text the server words
  itself (``Error executing tool crash``);
- ``hang(marker)``: writes this process's pid to the file ``marker`` (atomically), then
  never answers; a test kills the process while the call is open.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("calc", log_level="CRITICAL")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> str:
    return str(a + b)


@server.tool(description="Say a word twice, as two text blocks.")
def pair(word: str) -> list[str]:
    return [word, word.upper()]


@server.tool(description="Fail with the given reason.")
def fail(reason: str) -> str:
    raise ToolError(reason)


@server.tool(description="Raise an unexpected exception.")
def crash() -> str:
    raise ValueError("the secret detail the server keeps to itself")


@server.tool(description="Write this server's pid to `marker`, then never answer.")
def hang(marker: str) -> str:
    path = Path(marker)
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(str(os.getpid()))
    temp.rename(path)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    server.run("stdio")
