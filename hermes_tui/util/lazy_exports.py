"""A package's names imported from its modules on first use (PEP 562 ``__getattr__``).

A package that re-exports its modules' names would import all of them with itself; the
app's first frame needs a few names of ``tools`` and ``hub``, not the built-in tools, the
argument validator or the download code behind the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, module_of: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``name`` from its module ``module_of[name]``
    (relative to the package), kept in ``namespace`` (the package's globals) once imported."""

    def attribute(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    return attribute
