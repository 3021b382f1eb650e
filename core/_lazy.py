"""Lazy public names for a package: imported from their module on first use, so importing the
package stays cheap (``harnessgrid --help`` must not pay for the runtime or numpy)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, names: Mapping[str, str]) -> tuple[
        Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, serving ``{name: defining module}``.

    Usage, in the package's ``__init__``: ``__getattr__, __dir__ = lazy_exports(__name__, M)``.
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        vars(sys.modules[package])[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(names) | set(vars(sys.modules[package])))

    return __getattr__, __dir__
