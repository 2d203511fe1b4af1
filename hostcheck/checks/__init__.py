"""Checks: pure functions of facts and a policy threshold, registered by stable id."""

from hostcheck.checks.base import REGISTRY, CheckMeta

CHECK_MODULES = ("gpu", "machine", "storage", "isolation", "docker", "ssh", "packages", "network", "reliability", "agents")


def load_registry() -> dict[str, CheckMeta]:
    """Import every check module once; registration happens at import."""
    import importlib

    for name in CHECK_MODULES:
        importlib.import_module(f"hostcheck.checks.{name}")
    return REGISTRY
