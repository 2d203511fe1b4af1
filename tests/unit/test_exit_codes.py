"""One exit-code table: `hostcheck --help`, `hostcheck earnings --help`, README.md and
docs/audit.md say what hostcheck.exit_codes.EXIT_CODES says, and every command path answers
bad input with the table's bad-input code, as a real process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostcheck import exit_codes
from hostcheck.cli import COMMANDS, load_command
from hostcheck.exit_codes import EVERY_COMMAND, EXIT_CODES
from tests.helpers import SNAPSHOTS

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import gen_exit_codes_doc  # noqa: E402

ENV = {**os.environ, "COLUMNS": "80", "XDG_CONFIG_HOME": "/nonexistent", "HOSTCHECK_PROBE_TOKEN": "t" * 32}


def _hostcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostcheck.cli", *args], capture_output=True, text=True,
                          timeout=60, env=ENV, cwd=REPO)


def _words(text: str) -> str:
    return " ".join(text.split())


def _code_of(start: str, command: str = EVERY_COMMAND) -> int:
    """The table's code for the row said of ``command`` whose meaning starts with ``start``."""
    (code,) = [code for code, said_of, said in EXIT_CODES if said_of == command and said.startswith(start)]
    return code


def test_the_codes_scripts_gate_on_stay_what_they_are() -> None:
    # The fleet audit (playbooks/audit.yml) and owners' scripts gate on these numbers.
    assert (_code_of("a requested policy is feasible", "audit"), _code_of("no requested policy", "audit"),
            _code_of("a policy is feasible, but the owner risk", "audit")) == (0, 3, 4)
    assert (_code_of("internal error"), _code_of("bad input"), _code_of("interrupted")) == (1, 2, 128 + 2)
    assert _code_of("nothing was measured", "speedtest") == 3
    assert list(exit_codes.EARNINGS_ORDER) == [4, 3, 0]
    assert len({(code, said_of) for code, said_of, _ in EXIT_CODES}) == len(EXIT_CODES), "one row per code and command"


def test_root_help_lists_every_row_of_the_table() -> None:
    proc = _hostcheck("--help")
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout[proc.stdout.index("Exit codes:"):]
    rows = re.findall(r"^\s+(\d+)\s{2,}(.*(?:\n\s{7,}\S.*)*)", shown, re.M)
    expected = [(str(code), f"{said_of}: {said}" if said_of else said)
                for code, said_of, said in sorted(EXIT_CODES, key=lambda row: row[0])]
    assert [(code, _words(text)) for code, text in rows] == expected
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80


def test_earnings_help_lists_its_codes_in_the_order_they_apply() -> None:
    proc = _hostcheck("earnings", "--help")
    assert proc.returncode == 0, proc.stderr
    said = {code: text for code, said_of, text in EXIT_CODES if said_of == "earnings"}
    shown = _words(proc.stdout)
    positions = [shown.index(f"{code} {_words(said[code])}") for code in exit_codes.EARNINGS_ORDER]
    assert positions == sorted(positions)
    assert f"Exit codes: {_code_of('bad input')} for bad input" in shown


def _markdown_rows(path: Path, marker: str) -> list[tuple[str, str]]:
    text = path.read_text()
    body = text[text.index(marker):text.index("<!-- /exit-codes -->", text.index(marker))]
    return re.findall(r"^\| (\d+) \| (.*) \|$", body, re.M)


def test_readme_and_the_audit_page_say_what_the_table_says() -> None:
    every = [(str(code), f"{said_of}: {said}" if said_of else said)
             for code, said_of, said in sorted(EXIT_CODES, key=lambda row: row[0])]
    assert _markdown_rows(REPO / "README.md", "<!-- exit-codes -->") == every
    audit_own = {code for code, said_of, _ in EXIT_CODES if said_of == "audit"}
    audit = [(str(code), said) for code, said_of, said in sorted(EXIT_CODES, key=lambda row: row[0])
             if said_of == "audit" or (said_of == EVERY_COMMAND and code not in audit_own)]
    assert _markdown_rows(REPO / "docs" / "audit.md", "<!-- exit-codes: audit -->") == audit
    assert gen_exit_codes_doc.main(["--check"]) == 0


EARNINGS = ["earnings", "--wall-idle-w", "50", "--wall-load-w", "450", "--electricity", "0.30", "--price", "0.25"]

BAD_INPUT: dict[str, list[str]] = {
    "audit": ["--facts", "/nonexistent.json"],
    "facts": ["--timeout", "0"],
    "policies": ["--format", "markdown"],
    "explain": ["NOPE-1"],
    "probe-server": ["--port", "70000"],
    "speedtest": ["--probe", "https://127.0.0.1:1", "--streams", "9"],
    "offer": ["--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--disk-size-mib", "5"],
    "report": ["--facts", "/nonexistent.json", "-o", "-"],
    "fleet": ["/nonexistent"],
    "fleet table": ["/nonexistent"],
    "fleet diff": ["/nonexistent/a.json", "/nonexistent/b.json"],
    "fleet watch": ["/nonexistent"],
    "earnings": [*EARNINGS[1:], "--occupancy", "250"],
    "market": ["--gpu", "RTX 3090", "--gpus", "0"],
    "market report": ["--db", "/nonexistent/market.db"],
    "watch": ["--interval", "0"],
    "watch report": ["--db", "/nonexistent/watch.db"],
    "watch alert-rules": ["extra"],
    "selftest": ["--minutes", "0"],
}
"""Bad input for every command path (``fleet`` and ``watch`` run a command of their own too)."""


RUN_ON_THEIR_OWN = {"fleet"}
"""Groups that run a command of theirs when given none (`hostcheck fleet DIR` is `fleet table DIR`)."""


def _paths(command: Any, path: str) -> list[str]:
    subs = getattr(command, "commands", None)
    if subs is None:
        return [path]
    own = [path] if getattr(command, "invoke_without_command", False) or path in RUN_ON_THEIR_OWN else []
    return own + [p for name in subs for p in _paths(subs[name], f"{path} {name}")]


def test_every_command_path_has_a_bad_input_case() -> None:
    paths = [p for name in COMMANDS for p in _paths(load_command(name), name)]
    assert sorted(paths) == sorted(BAD_INPUT)


@pytest.mark.parametrize("path", list(BAD_INPUT))
def test_bad_input_exits_with_the_tables_code(path: str) -> None:
    proc = _hostcheck(*path.split(), *BAD_INPUT[path])
    assert proc.returncode == _code_of("bad input"), (proc.returncode, proc.stderr)
    assert "hostcheck: error:" in proc.stderr or "Error:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
