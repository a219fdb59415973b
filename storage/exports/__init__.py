"""Exports and imports of other tools' and the standards' formats: one module a format.

Each module reads the read model (:mod:`sessiontape.storage.catalog`), never the layouts'
raw files, and writes its format (a file written beside its target and renamed into place,
0600): ``ledger`` (the Agents Ledger tables, SQLite), ``session_events`` (Agent
Sessions), ``markdown`` and ``html`` (transcripts), ``agentrun``, ``atif``; what they
share: ``output`` (the file), ``summary`` (the read loop, the summary), ``transcript``.

May import: the shared ground, ``catalog``. Never a layout's package directly.
"""
