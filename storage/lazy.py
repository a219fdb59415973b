"""Packages whose public names are imported on first use (PEP 562)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(package: str, exports: dict[str, list[str]], defined: tuple[str, ...] = ()
                 ) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package``.

    ``exports`` maps each submodule to the names it provides; a name is
    imported from its submodule when first asked for, then kept. A name may also be a
    module inside that submodule (``{"skillet": ["log_entries"]}``). ``defined``: names
    the package defines itself, listed beside them.
    """
    module_of = {name: module for module, names in exports.items() for name in names}
    names = sorted([*module_of, *defined])

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        owner = import_module(f".{module}", package)
        try:
            value = getattr(owner, name)
        except AttributeError:  # not a name the module defines: a module inside it
            value = import_module(f".{module}.{name}", package)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return names

    return names, __getattr__, __dir__
