"""``python -m sessiontape``: the sessiontape command line."""

from .cli import main

raise SystemExit(main())
