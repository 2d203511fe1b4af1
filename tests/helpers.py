"""Small helpers shared by the audit tests (paths and running the real CLI)."""

from __future__ import annotations

import io
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


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`hostcheck ARGS` through the executable's own entry point (hostcheck.cli.main) in this
    process: the exit code, stdout and stderr a fresh process gives to a pipe, without the
    interpreter start and imports (about half a second each). For tests about what a command
    prints and exits with. A command that writes to a file descriptor of its own (``-o
    /dev/stdout``), runs until stopped, handles signals or sets up logging, and a test about
    the process itself, use :func:`hostcheck`."""
    from hostcheck.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.argv, sys.stdin, sys.stdout, sys.stderr, os.environ.copy(), os.getcwd()
    # A pipe's width, as the fresh process sees it: COLUMNS when set, else the renderers' 80.
    os.environ.setdefault("COLUMNS", "80")
    os.environ.update(env or {})
    os.chdir(REPO)
    sys.argv = ["hostcheck", *args]
    sys.stdin = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8")
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace")
    code: int | str | None = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    finally:
        if isinstance(code, str):  # as the interpreter does with sys.exit("message")
            print(code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
        sys.argv, sys.stdin, sys.stdout, sys.stderr, environ, cwd = saved
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(["hostcheck", *args], returncode, stdout, stderr)


def audit_json(*args: str) -> tuple[int, dict[str, Any]]:
    proc = run_cli("audit", "--format", "json", *args)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def policy_result(report: dict[str, Any], policy_id: str) -> dict[str, Any]:
    return next(p for p in report["policies"] if p["id"] == policy_id)
