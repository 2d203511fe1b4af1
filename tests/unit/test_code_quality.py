"""The code's habits as a test: ruff and mypy, configured in pyproject.toml, find nothing.

Both run from the same interpreter as pytest (the venv's), so the test, the pre-commit hooks
and a contributor's editor all see the same versions and the same settings. Both are in the
test extras (pip install -e '.[test]'); a missing one fails here rather than skipping, so the
check cannot silently go away."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing() -> None:
    res = _run("ruff", "check", "--no-cache", "hostcheck", "tests", "bench", "scripts")
    assert res.returncode == 0, f"ruff findings:\n{res.stdout}{res.stderr}"


def test_mypy_finds_nothing() -> None:
    # The files to check and the strictness come from [tool.mypy] in pyproject.toml.
    res = _run("mypy", "--no-incremental", "--cache-dir", "/dev/null")
    assert res.returncode == 0, f"mypy findings:\n{res.stdout}{res.stderr}"
