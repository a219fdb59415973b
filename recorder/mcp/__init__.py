"""``sessiontape mcp``: the recorded sessions as an MCP server over stdio, read-only.

Agents and assistants read their own past sessions through it: :func:`make_server` builds
an :class:`mcp.server.mcpserver.MCPServer` (the official ``mcp`` SDK) with four tools over
the catalog, each answering with the JSON of the CLI verb it mirrors; :func:`run` serves it
over stdio until the client closes. Needs the ``mcp`` extra (``pip install
'sessiontape[mcp]'``; the Agents SDK already brings ``mcp``). docs/mcp.md.
"""

from __future__ import annotations

from .server import MAX_RESULT_CHARS, make_server, run

__all__ = ["MAX_RESULT_CHARS", "make_server", "run"]
