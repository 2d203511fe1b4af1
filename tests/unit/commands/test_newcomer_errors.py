"""The mistakes a newcomer makes, each answered with one line that names it and exit 2
(hostcheck.exit_codes: EXIT_USAGE); Ctrl-C with one line and 130 (EXIT_INTERRUPTED), except
for `watch`, whose normal stop it is: it says what it wrote and exits 0."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostcheck.exit_codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from hostcheck.recording.store import read_recording
from tests.helpers import REPO, SNAPSHOTS, run_cli

LAPTOP = str(SNAPSHOTS / "reference-laptop.json")
POLICY = str(REPO / "policies" / "vast.yaml")
REPORT = str(REPO / "tests" / "golden" / "dedicated-4090.json")


def _one_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line the command printed, after checking it is the only one and the exit is 2."""
    assert proc.returncode == EXIT_USAGE, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize(("args", "option"), [
    (["audit", "-facts", LAPTOP], "facts"),  # the parser would read -f acts: "--format: 'acts'"
    (["audit", "--facts", LAPTOP, "-policy", "vast"], "policy"),  # -p olicy: "no policy named 'olicy'"
    (["earnings", "-price", "0.2"], "price"),
    (["watch", "report", "-db", "x.db"], "db"),
    (["fleet", "diff", "-format", "json", "a", "b"], "format"),
])  # fmt: skip
def test_a_long_option_with_one_dash_is_named(args: list[str], option: str) -> None:
    assert _one_error(run_cli(*args)) == f"hostcheck: error: -{option}: long options take two dashes: --{option}"


def test_short_options_and_their_values_are_not_mistaken_for_one() -> None:
    proc = run_cli("audit", "-vp", "vast", "--facts", LAPTOP, "-f", "json")  # -v -p vast, -f json
    assert proc.returncode in (0, 3, 4) and proc.stdout.startswith("{"), proc.stderr


def test_a_facts_file_given_as_a_policy_is_one_line() -> None:
    line = _one_error(run_cli("audit", "--facts", LAPTOP, "--policy", LAPTOP))
    assert line == (f"hostcheck: error: {LAPTOP}: a facts snapshot (what `hostcheck facts` writes), "
                    "not a policy: give it to --facts")


def test_a_report_given_as_a_policy_is_one_line() -> None:
    line = _one_error(run_cli("audit", "--facts", LAPTOP, "--policy", REPORT))
    assert line.endswith(": a hostcheck report (what `hostcheck audit --format json` writes), not a policy: "
                         "give it to --facts")


@pytest.mark.parametrize("command", ["audit", "offer", "earnings"])
def test_a_policy_given_as_facts_is_one_line(command: str) -> None:
    extra = ["--electricity", "0.3", "--price", "0.2", "--occupancy", "50", "--no-config"] if command == "earnings" else []
    line = _one_error(run_cli(command, "--facts", POLICY, *extra))
    assert line == f"hostcheck: error: {POLICY}: a policy, not a facts snapshot: `hostcheck audit --policy` takes it"


def test_a_policy_still_loads_as_a_policy() -> None:
    proc = run_cli("audit", "--facts", LAPTOP, "--policy", POLICY, "--format", "json")
    assert proc.returncode in (0, 3, 4) and proc.stdout.startswith("{"), proc.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (["audit", "--facts", "{dir}"], "{dir}: a directory, not a regular file: name a file in it"),
    (["audit", "--facts", LAPTOP, "--policy", "{dir}"], "{dir}: a directory, not a regular file: name a file in it"),
    (["offer", "--facts", "{dir}"], "{dir}: a directory, not a regular file: name a file in it"),
    (["watch", "report", "--db", "{dir}"], "{dir} is a directory: --db takes the database file (e.g. {dir}/watch.db)"),
])  # fmt: skip
def test_a_directory_where_a_file_is_wanted_is_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    line = _one_error(run_cli(*[a.format(dir=tmp_path) for a in args]))
    assert line == "hostcheck: error: " + expected.format(dir=tmp_path)


def _popen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hostcheck.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=REPO, env={**os.environ, **(env or {})},
        # as a terminal's ^C reaches it: a suite started in the background of a non-interactive
        # shell inherits SIGINT ignored, and Python then keeps it so
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip


def test_ctrl_c_is_one_line_and_exit_130() -> None:
    """Interrupted mid-work (waiting on a server that never answers): one line, 130, no traceback."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(30)
        proc = _popen("speedtest", "--probe", f"http://127.0.0.1:{server.getsockname()[1]}", "--insecure-http",
                      "--seconds", "60", env={"HOSTCHECK_PROBE_TOKEN": "t" * 32})
        try:
            conn, _ = server.accept()  # the command is at work now, waiting for the server's answer
            with conn:
                proc.send_signal(signal.SIGINT)
                out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == EXIT_INTERRUPTED
    assert out == ""
    lines = [line for line in err.splitlines() if not line.startswith("warning: --insecure-http")]
    assert lines == ["hostcheck: interrupted (Ctrl-C)"], err


def test_ctrl_c_stops_watch_with_what_it_wrote_and_exit_0(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with socket.socket() as target:
        target.bind(("127.0.0.1", 0))
        target.listen(8)
        proc = _popen("watch", "--db", str(db), "--interval", "1", "--target", f"tcp:127.0.0.1:{target.getsockname()[1]}",
                      "--journal-file", str(tmp_path / "none.journal"), "--allow-more-traffic")
        try:
            assert proc.stderr is not None
            started = proc.stderr.readline()  # "recording into ... stop with Ctrl-C"
            assert "stop with Ctrl-C" in started, started
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not db.exists():
                time.sleep(0.05)
            time.sleep(1.5)  # a sample or two
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == EXIT_OK, err
    last = err.splitlines()[-1]
    said = re.fullmatch(r"hostcheck watch: (\d+) samples? written \(SIGINT\)", last)
    assert said, err
    assert int(said.group(1)) == len(read_recording(db).samples) > 0
    assert "interrupted" not in err and "Traceback" not in err
