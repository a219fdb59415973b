"""Names of the tables sessiontape keeps beside ``session_items`` in the store file.

Kept apart from the modules that use them so that readers (the CLI) can name
them without importing the Agents SDK.
"""

ARCHIVE_TABLE = "session_items_archive"
COMPACTIONS_TABLE = "sessiontape_compactions"
LINKS_TABLE = "sessiontape_links"
