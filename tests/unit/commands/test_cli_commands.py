"""The command tree: every command loads and answers --help, `hostcheck --help` loads none of
them, a bad choice is exit 2 naming its option, an input error from any library is exit 2 with
its message."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from hostcheck.cli import COMMANDS, app
from tests.helpers import SNAPSHOTS


def _invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_loads_and_answers_help(name: str) -> None:
    code, output = _invoke(name, "--help")
    assert code == 0 and f"Usage: root {name}" in output, output


def test_the_root_help_lists_every_command_and_imports_none() -> None:
    probe = (
        "import sys; from hostcheck.cli import main; sys.argv = ['hostcheck', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('hostcheck.commands', 'hostcheck.collectors', "
        "'hostcheck.earnings', 'hostcheck.watch')) and m not in SHARED), file=sys.stderr)"
    )
    # The root's own error exit is the one every command shares: that module, and no command.
    probe = "SHARED = ('hostcheck.commands', 'hostcheck.commands.common')\n" + probe
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.stderr.strip() == "[]", proc.stderr
    for name, entry in COMMANDS.items():
        assert name in proc.stdout and entry.summary.split()[0] in proc.stdout


BAD_CHOICES = [
    ("audit", "--format", "yaml"),
    ("audit", "--format", "JSON"),
    ("offer", "--format", "yaml"),
    ("earnings", "--format", "yaml"),
    ("policies", "--format", "markdown"),
    ("watch", "report", "--format", "yaml"),
    ("fleet", "--sort", "size"),
    ("fleet", "diff", "--format", "html"),
]


@pytest.mark.parametrize("args", BAD_CHOICES, ids=[" ".join(a) for a in BAD_CHOICES])
def test_a_choice_not_offered_is_exit_2_naming_the_option(args: tuple[str, ...]) -> None:
    code, output = _invoke(*args, "somewhere")
    option = next(a for a in args if a.startswith("--"))
    assert code == 2 and f"Invalid value for '{option}'" in output and args[-1] in output, output


EARNINGS = ["earnings", "--wall-idle-w", "50", "--wall-load-w", "450", "--electricity", "0.30", "--price", "0.25"]


@pytest.mark.parametrize(("args", "message"), [
    (["audit", "--facts", "/nonexistent.json"], "/nonexistent.json: cannot read"),  # FactsError
    (["audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "-p", "/nonexistent.yaml"], "/nonexistent.yaml"),  # PolicyError
    (["fleet", "/nonexistent"], "/nonexistent: no such file or directory"),  # FleetError
    (["watch", "report", "--db", "/nonexistent/watch.db"], "no watch database at /nonexistent/watch.db"),  # WatchDbError
    ([*EARNINGS, "--occupancy", "250"], "--occupancy"),  # EarningsInputError
    (["offer", "--disk-size-mib", "5"], "--disk-size-mib must be 64-1024 MiB, not 5"),  # disk_bw's own limit
    (["speedtest", "--probe", "https://127.0.0.1:1", "--streams", "9"], "--streams must be 1-8"),  # the speed test's
])
def test_an_input_error_from_a_library_is_exit_2_with_its_message(args: list[str], message: str) -> None:
    code, output = _invoke(*args, env={"XDG_CONFIG_HOME": "/nonexistent", "HOSTCHECK_PROBE_TOKEN": "t" * 32})
    assert code == 2 and f"hostcheck: error: {message}" in output, output
