"""Shared pytest setup. Keep this minimal: test modules live in several places under tests/."""

pytest_plugins = ["tests.lab.fixtures"]
