"""Load the user's ``Agent`` from ``module:attr`` or ``path/to/file.py:attr``.

The attribute is an ``Agent``, or a function that returns one (called with
no arguments, once; a coroutine function is awaited). A dotted attribute
(``module:holder.agent``) is followed. Without ``:attr`` the attribute
``agent`` is used.

A module name is imported with the current directory on ``sys.path`` (as
``python -m`` would); a ``.py`` path is loaded from its file, with its own
directory on ``sys.path`` so that it can import its neighbours.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from agents import Agent

__all__ = ["DEFAULT_ATTRIBUTE", "AgentLoadError", "load_agent", "split_spec"]

DEFAULT_ATTRIBUTE = "agent"


class AgentLoadError(Exception):
    """The ``--agent`` spec names nothing that gives an Agent (the message says why)."""


def split_spec(spec: str) -> tuple[str, str]:
    """``"pkg.mod:attr"`` -> ``("pkg.mod", "attr")``; a Windows drive letter is no separator."""
    source, sep, attr = spec.rpartition(":")
    if not sep or not source or (len(source) == 1 and attr.startswith(("\\", "/"))):
        return spec, DEFAULT_ATTRIBUTE
    return source, attr


def _is_path(source: str) -> bool:
    return source.endswith(".py") or os.sep in source or "/" in source


def _prepend(directory: str) -> None:
    if directory not in sys.path:
        sys.path.insert(0, directory)


def _load_file(source: str) -> ModuleType:
    path = Path(source).expanduser()
    if not path.is_file():
        raise AgentLoadError(f"no such file: {source}")
    path = path.resolve()
    name = f"_sessiontape_agent_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AgentLoadError(f"cannot load {source} as a Python module")
    module = importlib.util.module_from_spec(spec)
    _prepend(str(path.parent))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise AgentLoadError(f"importing {source} failed: {type(exc).__name__}: {exc}") from exc
    return module


def _import_module(source: str) -> ModuleType:
    _prepend(os.getcwd())
    try:
        return importlib.import_module(source)
    except ModuleNotFoundError as exc:
        if exc.name and (source == exc.name or source.startswith(exc.name + ".")):
            raise AgentLoadError(f"no module named {source!r} (run from the directory that "
                                 "holds it, or give a path/to/file.py)") from exc
        raise AgentLoadError(f"importing {source} failed: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        raise AgentLoadError(f"importing {source} failed: {type(exc).__name__}: {exc}") from exc


def _resolve(module: ModuleType, source: str, attr: str) -> Any:
    value: Any = module
    for part in attr.split("."):
        if not part.isidentifier():
            raise AgentLoadError(f"{attr!r} is not an attribute name")
        try:
            value = getattr(value, part)
        except AttributeError:
            raise AgentLoadError(f"{source} has no attribute {attr!r}") from None
    return value


def _call_factory(value: Any, where: str) -> Any:
    try:
        made = value()
        if inspect.isawaitable(made):
            made = asyncio.run(_awaited(made))
    except Exception as exc:
        raise AgentLoadError(f"calling {where}() failed: {type(exc).__name__}: {exc}") from exc
    return made


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def load_agent(spec: str) -> Agent[Any]:
    """The Agent that ``spec`` names; :class:`AgentLoadError` with a clear reason if none."""
    spec = spec.strip()
    if not spec:
        raise AgentLoadError("empty agent spec (expected module:attr or path/to/file.py:attr)")
    source, attr = split_spec(spec)
    module = _load_file(source) if _is_path(source) else _import_module(source)
    value = _resolve(module, source, attr)
    where = f"{source}:{attr}"
    if isinstance(value, Agent):
        return value
    if callable(value) and not isinstance(value, type):
        value = _call_factory(value, where)
        if isinstance(value, Agent):
            return value
        raise AgentLoadError(f"{where}() returned {type(value).__name__}, not an agents.Agent")
    raise AgentLoadError(f"{where} is a {type(value).__name__}, not an agents.Agent "
                         "(or a function returning one)")
