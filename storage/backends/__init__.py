"""Where a store other than SQLite plugs in.

The item store, its archive, the links and the catalog are SQLite files today:
``sessiontape.storage.db`` owns their connections and schemas, and
``skillet.item_store.ItemStore`` is the store a ``Recorder`` opens. A backend for another
server (PostgreSQL) is one module here that provides the same store (an SDK Session per
conversation, with ``add_items``/``get_items``/``pop_item``/``clear_session``, compaction's
archive and the links) and is chosen by the store's location (a ``postgresql://`` URL), so
that its callers do not change.

May import: the shared ground, ``skillet``. (The item shapes, and the store it stands in
for.)
"""
