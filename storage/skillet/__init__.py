"""The skillet layout (skilled_crew's): the SQLite item store and the JSONL replay log.

Owns ``items`` (item shapes, the JS SDK's protocol), ``item_rows`` (``session_items``' schema and
rows, whatever store holds them: no SDK import), ``item_store`` (the SQLite file, an SDK
Session), ``compaction`` and ``summarizers`` (the store kept bounded, nothing lost; ``archive``:
its archive and log in the SQLite file),
``replay_log``, ``log_entries``, ``log_reader``, ``log_owners`` and ``log_follow`` (the log
per (user, session): its lines, reading, who owns a file, following many files live,
``agentrun_stream``: its lines as agentrun messages),
``links`` (the store's row linking a conversation to its AgentUse tree) and ``sink`` (the
recorder's events into the log).

May import: the shared ground, ``agentuse.reader``. (``links`` checks the ``session.json``
a link names.) Never the read model.
"""
