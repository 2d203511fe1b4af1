"""Checks: pure functions of facts and a policy threshold, registered by stable id.

Every module of this package but ``base`` is a family's checks; each registers its checks with
``@check`` when imported. A new family is a new module here: nothing else lists it.
"""

from functools import cache

from hostcheck.checks.base import REGISTRY, CheckMeta


@cache
def check_modules() -> tuple[str, ...]:
    """The check modules' names, in a fixed order (by name); read once."""
    import pkgutil

    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "base" and not m.name.startswith("_")))


def load_registry() -> dict[str, CheckMeta]:
    """Import every check module once; registration happens at import."""
    import importlib

    for name in check_modules():
        importlib.import_module(f"{__name__}.{name}")
    return REGISTRY
