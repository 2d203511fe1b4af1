"""Checks: pure functions of facts and a policy threshold, registered by stable id.

Every module of this package but ``base`` (the machinery) and ``readers`` (the facts more than
one family reads) holds checks of one family or a few; each declares its families with
``family(...)`` and registers its checks with ``@check`` when imported. A new family is a new
module here: nothing else lists it. A family imports only ``base`` and ``readers``, never another
family.
"""

from functools import cache

from hostcheck.checks.base import FAMILIES, REGISTRY, CheckMeta, Family, undeclared_families

SHARED = ("base", "readers")
"""The modules every family may import (the check machinery, the shared readers); they hold no checks."""


@cache
def check_modules() -> tuple[str, ...]:
    """The check modules' names, in a fixed order (by name); read once."""
    import pkgutil

    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in SHARED and not m.name.startswith("_")))


def load_registry() -> dict[str, CheckMeta]:
    """Import every check module once; registration happens at import."""
    import importlib

    for name in check_modules():
        importlib.import_module(f"{__name__}.{name}")
    problems = undeclared_families()
    if problems:
        raise ValueError("; ".join(problems))
    return REGISTRY


def load_families() -> list[Family]:
    """The families the check modules declare, in their declared order."""
    load_registry()
    return sorted(FAMILIES.values(), key=lambda f: f.order)


def family_prefixes() -> list[str]:
    """The prefixes a check id may have, in the families' order."""
    return [f.prefix for f in load_families()]
