"""Small helpers shared by the audit tests (paths and running the real CLI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SNAPSHOTS = REPO / "tests" / "snapshots"


def hostcheck(*args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI exactly as a user would (a fresh process each time)."""
    return subprocess.run(
        [sys.executable, "-m", "hostcheck.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )


def audit_json(*args: str) -> tuple[int, dict[str, Any]]:
    proc = hostcheck("audit", "--format", "json", *args)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def policy_result(report: dict[str, Any], policy_id: str) -> dict[str, Any]:
    return next(p for p in report["policies"] if p["id"] == policy_id)
