"""Every `hostcheck` command the project shows a user runs as shown.

The commands come from every check's fix text, from `hostcheck explain` for every check, and
from the README and docs/ (inline code and shell blocks). Placeholders are filled in with real
things (URL: a real `hostcheck probe-server`; FP: its certificate's fingerprint; FILE: a token
file, a snapshot, a policy or an output path, by the option before it; CHECK_ID; report
directories written by `hostcheck audit` itself). Everything runs in a network namespace of its
own holding only loopback, so nothing reaches the internet; the probe server runs there too,
started by the README's own command with HOME pointing at a temporary directory.

A command passes when it exits with a code its command documents for a result (not 1, an
internal error, nor 2, a usage or input error) and prints no traceback. An inline mention of a
command by name alone (`hostcheck earnings`, `hostcheck watch report`) names it: that command
must exist (`--help` answers). A recorder or server (`probe-server`, `watch` recording) passes
when it is still running after a few seconds.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hostcheck.checks import load_registry
from hostcheck.cli import app
from hostcheck.policy import load_shipped, shipped_policy_names

pytestmark = [pytest.mark.root]

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
HOSTCHECK = str(Path(sys.executable).parent / "hostcheck")
SNAPSHOT = REPO / "tests" / "snapshots" / "dedicated-4090.json"
PROBE_PORT = 8470
TIMEOUT_S = 60
# Exit codes that report a result: 0 ok / feasible, 3 not feasible, 4 owner risk, 5 not measured.
RESULT_CODES = {0, 3, 4, 5}
# Commands that run until stopped: still running after this long is what they should do.
LONG_RUNNING_S = 5

_SPAN = re.compile(r"`(hostcheck [^`]+)`")
_FENCE = re.compile(r"^```(?:sh|bash|shell|console)?\s*$")


def _commands_in_text(text: str) -> list[str]:
    """`hostcheck ...` in inline code, and shell-block lines that run hostcheck."""
    found = [m.group(1) for m in _SPAN.finditer(" ".join(text.split()))]  # a wrapped line is one text
    in_fence, shell, pending = False, False, ""
    for line in text.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            shell = in_fence and bool(_FENCE.match(line))
            pending = ""
            continue
        if not in_fence:
            continue
        if not shell:  # a transcript: the commands are the prompt lines
            if line.startswith("$ hostcheck "):
                found.append(line[2:])
            continue
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        line = line.removeprefix("$ ")
        if line.startswith("hostcheck "):
            found.append(line)
    return found


def _argv(command: str) -> list[str]:
    command = re.sub(r"\s+#.*$", "", command)  # a trailing shell comment
    command = command.replace("[", "").replace("]", "")  # optional parts, shown in brackets, are run
    command = re.sub(r"<([^>]+)>", lambda m: "<" + m.group(1).replace(" ", "_") + ">", command)
    return [tok for tok in shlex.split(command) if tok != "..."][1:]


def documented_commands() -> dict[str, list[str]]:
    """command as shown -> the places it is shown.

    `hostcheck explain ID` prints a check's why and fix texts and, per policy, the
    requirement's note: those are read here directly (one explain per check costs ~0.2 s).
    """
    where: dict[str, list[str]] = {}

    def add(text: str, place: str) -> None:
        for cmd in _commands_in_text(text):
            where.setdefault(cmd, []).append(place)

    for doc in DOCS:
        add(doc.read_text(encoding="utf-8"), doc.relative_to(REPO).as_posix())
    for chk in load_registry().values():
        add(chk.why, f"{chk.id} why (hostcheck explain)")
        add(chk.fix, f"{chk.id} fix (hostcheck explain)")
    for name in shipped_policy_names():
        for req in load_shipped(name).requirements:
            add(req.note or "", f"{name} note on {req.check} (hostcheck explain)")
    return where


def test_explain_prints_what_is_read_as_its_commands() -> None:
    """The shortcut above holds: explain's commands are those of the why, fix and note texts."""
    registry = load_registry()
    runner = CliRunner()
    for check_id in ("NET-1040", "NET-1070", "GPU-1050"):
        shown = runner.invoke(app, ["explain", check_id]).output
        notes = [r.note or "" for n in shipped_policy_names() for r in load_shipped(n).requirements if r.check == check_id]
        texts = " ".join([registry[check_id].why, registry[check_id].fix, *notes])
        assert set(_commands_in_text(shown)) == set(_commands_in_text(texts))


class Fill:
    """Real values for the placeholders the docs use."""

    def __init__(self, tmp: Path, fingerprint: str, reports: Path) -> None:
        self.tmp, self.fingerprint, self.reports = tmp, fingerprint, reports
        self.policy = tmp / "my-cluster.yaml"
        shutil.copy(REPO / "policies" / "vast.yaml", self.policy)
        self.outputs = 0

    def output(self) -> str:
        self.outputs += 1
        return str(self.tmp / f"out-{self.outputs}.txt")

    def __call__(self, argv: list[str]) -> list[str]:
        out: list[str] = []
        for i, tok in enumerate(argv):
            prev = argv[i - 1] if i else ""
            if tok == "URL" or tok.startswith("https://VPS"):
                tok = f"https://127.0.0.1:{PROBE_PORT}"
            elif tok == "FP" or tok.startswith("SHA256:"):
                tok = self.fingerprint
            elif tok in ("CHECK_ID", "ID", "SYS-1990"):  # SYS-1990: CONTRIBUTING's example of a new check
                tok = "GPU-1050"
            elif tok == "N" and prev == "--probe-port":
                tok = "40000"
            elif tok == "DAYS" and prev == "--stale":
                tok = "90"
            elif tok in ("NAME|FILE", "<platform>", "NAME"):
                tok = "vast"
            elif tok in ("DIR", "OLD", "NEW", "OLD_DIR", "NEW_DIR", "<report_dir>") or tok.startswith("reports/audit-"):
                tok = str(self.reports)
            elif tok.endswith(".yaml") and not (REPO / tok).exists():
                tok = str(self.policy)
            elif prev in ("-o", "--output") and tok != "-" and not tok.startswith("/"):
                tok = self.output()  # a file the docs name: written in the test's folder, never the checkout
            elif tok in ("FILE", "saved.json"):
                tok = {
                    "--token-file": str(self.tmp / ".probe-token"),
                    "-o": self.output(),
                    "--output": self.output(),
                    "--policy": str(self.policy),
                    "-p": str(self.policy),
                }.get(prev, str(SNAPSHOT))
            elif tok.startswith("~/"):
                tok = str(self.tmp / tok[2:])
            out.append(tok)
        return out


def _run_in_namespace(tmp: Path, commands: dict[str, list[str]]) -> dict[str, dict]:
    """Run the commands, as JSON argv lists, inside `unshare --net` (loopback only)."""
    spec = tmp / "commands.json"
    spec.write_text(json.dumps({"tmp": str(tmp), "commands": commands}))
    proc = subprocess.run(
        ["unshare", "--net", "--kill-child", sys.executable, __file__, str(spec)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S * (len(commands) + 2),
        cwd=REPO,
    )
    assert proc.returncode == 0, f"namespace driver failed: {proc.stderr[-3000:]}"
    return json.loads((tmp / "results.json").read_text())


def _until_it_has_recorded(argv: list[str], env: dict[str, str], tmp: Path) -> dict[str, Any]:
    """A command that runs until stopped (`hostcheck watch --for 7d`): still running after
    LONG_RUNNING_S and once its database holds a sample (however loaded the machine, so the
    `watch report` after it reads a recording), then stopped with Ctrl-C, as a user would."""
    import sqlite3

    from hostcheck.errors import WatchDbError
    from hostcheck.recording.store import read_recording

    # the database it names, or the user's default (no /var/lib/hostcheck-watch here)
    db = Path(argv[argv.index("--db") + 1]) if "--db" in argv else Path(env["XDG_STATE_HOME"]) / "hostcheck" / "watch.db"
    proc = subprocess.Popen([HOSTCHECK, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + TIMEOUT_S
    time.sleep(LONG_RUNNING_S)
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if db.exists() and read_recording(db).samples:
                break
        except (WatchDbError, sqlite3.Error, OSError):  # being created: look again
            pass
        time.sleep(0.2)
    if proc.poll() is not None:
        out, err = proc.communicate()
        return {"rc": f"stopped by itself with {proc.returncode}", "out": out[-2000:], "err": err[-2000:]}
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    return {"rc": proc.returncode, "out": out[-2000:], "err": err[-2000:]}


def _driver(spec_path: str) -> None:
    """Inside the namespace: loopback up, the probe server by the README's command, then each command."""
    from hostcheck.probeserver import tls

    spec = json.loads(Path(spec_path).read_text())
    tmp = Path(spec["tmp"])
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    env = {**os.environ, "HOME": str(tmp), "XDG_STATE_HOME": str(tmp / ".local" / "state"), "NO_COLOR": "1"}
    # Where a command shows no --token-file, the token comes from the documented variable.
    env["HOSTCHECK_PROBE_TOKEN"] = (tmp / ".probe-token").read_text().strip()
    server = subprocess.Popen(
        [HOSTCHECK, "probe-server", "--token-file", str(tmp / ".probe-token")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "probe-server.log").open("w"),
    )
    results: dict[str, dict] = {}
    try:
        cert = tmp / ".local" / "state" / "hostcheck" / tls.CERT_NAME
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not _listening(PROBE_PORT):
            time.sleep(0.1)
        fingerprint = tls.fingerprint_of_pem_file(cert) if cert.exists() else "no-certificate"
        (tmp / "fingerprint").write_text(fingerprint)
        def run(key: str, argv: list[str]) -> None:
            argv = [fingerprint if a == "@FINGERPRINT@" else a for a in argv]
            if argv[:1] == ["probe-server"]:
                # The server is already running with this very command line.
                results[key] = {"rc": 0 if server.poll() is None else server.returncode, "out": "", "err": ""}
                return
            if _names_a_command(key):
                argv = [*argv, "--help"]
            long_running = argv[:1] == ["watch"] and argv[1:2] != ["report"] and "--help" not in argv
            started = time.monotonic()
            if long_running:
                results[key] = {**_until_it_has_recorded(argv, env, tmp), "seconds": round(time.monotonic() - started, 1)}
                return
            try:
                p = subprocess.run([HOSTCHECK, *argv], env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
                result = {"rc": p.returncode, "out": p.stdout[-2000:], "err": p.stderr[-2000:]}
            except subprocess.TimeoutExpired:
                result = {"rc": "timeout", "out": "", "err": f"still running after {TIMEOUT_S} s"}
            results[key] = {**result, "seconds": round(time.monotonic() - started, 1)}

        # Commands that share the probe server (its per-address slots and byte budget) or a
        # watch database run one after another, in the order shown; the rest side by side.
        ordered = [k for k in spec["commands"] if _shares_state(spec["commands"][k])]
        with ThreadPoolExecutor(max_workers=3) as pool:
            side_by_side = [pool.submit(run, k, argv) for k, argv in spec["commands"].items() if k not in ordered]
            for key in ordered:
                run(key, spec["commands"][key])
            for future in side_by_side:
                future.result()
    finally:
        server.terminate()
        server.wait(10)
        (tmp / "results.json").write_text(json.dumps(results))


def _shares_state(argv: list[str]) -> bool:
    return argv[:1] in (["speedtest"], ["probe-server"], ["watch"]) or "--probe" in argv


def _names_a_command(shown: str) -> bool:
    """`hostcheck earnings` or `hostcheck watch report` in running text: a name, not a command line."""
    return re.fullmatch(r"hostcheck( [a-z][a-z-]*){1,2}", shown) is not None and shown not in (
        "hostcheck audit", "hostcheck facts", "hostcheck policies")


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _reports_dir(tmp: Path) -> Path:
    """Two hosts' JSON reports, written by `hostcheck audit` itself, as `hostcheck fleet` reads them."""
    from tests.helpers import run_cli  # here: the namespace driver runs this file as a script

    reports = tmp / "reports"
    reports.mkdir()
    for name in ("dedicated-4090", "reference-laptop"):
        p = run_cli("audit", "--facts", str(REPO / "tests" / "snapshots" / f"{name}.json"), "--format", "json")
        assert p.returncode in RESULT_CODES, p.stderr
        (reports / f"{name}.json").write_text(p.stdout)
    return reports


def test_the_docs_show_commands_to_run() -> None:
    where = documented_commands()
    subcommands = {_argv(c)[0] for c in where if _argv(c)}
    # The extraction itself is checked: each kind of place yields commands.
    assert {"audit", "explain", "fleet", "probe-server", "speedtest", "facts", "policies"} <= subcommands
    places = [p for ps in where.values() for p in ps]
    assert any(" fix (hostcheck explain)" in p for p in places)
    assert any(p == "README.md" for p in places)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace of its own")
def test_every_documented_command_runs_as_shown(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    token = tmp_path / ".probe-token"
    token.write_text("documented-commands-token-0123456789\n")
    token.chmod(0o600)
    fill = Fill(tmp_path, "@FINGERPRINT@", _reports_dir(tmp_path))
    where = documented_commands()
    commands = {cmd: fill(_argv(cmd)) for cmd in where}
    results = _run_in_namespace(tmp_path, commands)
    broken = []
    for cmd, result in results.items():
        err = result["err"]
        if result["rc"] not in RESULT_CODES or "Traceback" in err:
            broken.append(f"{cmd!r} (shown in {', '.join(where[cmd])}) -> exit {result['rc']}: {err.strip()[-400:]}")
    slowest = sorted(results.items(), key=lambda kv: -float(kv[1].get("seconds") or 0))[:5]
    print("slowest:", [(cmd, r.get("seconds")) for cmd, r in slowest])
    assert not broken, "\n".join(broken)


if __name__ == "__main__":
    _driver(sys.argv[1])
