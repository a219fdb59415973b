"""The AgentUse layout: ``$XDG_DATA_HOME/agentuse/project/{hash}/session/{ULID}-{agent}/``.

Owns the tree's files (``session.json``, one ``message.json`` per exchange, one file per
part, subagents nested): ``writer`` (the documents), ``sink`` (the recorder's events into
them), ``reader`` (finding and loading sessions, the original tool's and ours) and
``liveness`` (a recording's status; closing what a killed process left open).

May import: the shared ground. No sibling.
"""
