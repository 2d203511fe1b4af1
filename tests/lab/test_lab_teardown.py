"""The lab cleans up after itself, whatever happens to the test that used it.

Each case runs a small pytest session in a subprocess that starts a real lab host, then
fails, is SIGTERMed, or is SIGKILLed; afterwards nothing of that session may be left on this
machine: no network namespace, no process (nspawn, the container's systemd, slirp4netns,
ssh masters, relays), no mount, no session folder.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lab.session import leftovers, reap_stale

pytestmark = [pytest.mark.nspawn, pytest.mark.root]

REPO = Path(__file__).resolve().parents[2]

INNER_TEST = '''
import os, time

def test_inner(lab_host):
    assert lab_host.run("systemctl is-system-running").stdout.strip() == "running"
    open(os.environ["LAB_INNER_READY"], "w").write(lab_host.name)
    if os.environ["LAB_INNER_MODE"] != "fail":
        time.sleep(300)  # the outer test signals us while the host is up
    assert False, "deliberate failure: the lab must still clean up"
'''


def _start_inner(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], str, Path]:
    sid = secrets.token_hex(3)
    test_file = tmp_path / "test_inner_lab.py"
    test_file.write_text(INNER_TEST)
    ready = tmp_path / "ready"
    env = dict(os.environ, HOSTCHECK_LAB_SID=sid, LAB_INNER_MODE=mode, LAB_INNER_READY=str(ready))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "tests.lab.fixtures", "-p", "no:cacheprovider",
            "--rootdir", str(tmp_path), "-c", os.devnull, str(test_file)]
    # ^C must reach the inner session as it reaches a terminal's: a run started in the
    # background of a non-interactive shell inherits SIGINT ignored, and Python then keeps it so.
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return proc, sid, ready


def _wait_ready(proc: subprocess.Popen[str], ready: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if proc.poll() is not None:
            pytest.fail(f"inner session ended before its host was up:\n{proc.stdout.read() if proc.stdout else ''}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("inner session's host did not come up")
        time.sleep(0.1)


def test_failing_test_leaves_nothing_behind(tmp_path: Path) -> None:
    """A failed assertion must not leak namespaces, containers or mounts: every later run
    (and the machine's owner) would inherit them."""
    proc, sid, ready = _start_inner(tmp_path, "fail")
    out, _ = proc.communicate(timeout=180)
    assert ready.exists(), f"inner host never came up:\n{out}"
    assert proc.returncode == 1, f"the inner test should fail (rc 1), got {proc.returncode}:\n{out}"
    assert "deliberate failure" in out
    assert leftovers(sid) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interrupted_session_leaves_nothing_behind(tmp_path: Path, signum: int) -> None:
    """CI cancels jobs with SIGTERM and people press ^C: both must run the full teardown."""
    proc, sid, ready = _start_inner(tmp_path, "hang")
    _wait_ready(proc, ready)
    assert any(item.startswith("netns") for item in leftovers(sid)), "the inner host should be running now"
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode != 0, out
    assert leftovers(sid) == [], out


def test_killed_session_is_reaped(tmp_path: Path) -> None:
    """SIGKILL cannot be caught: the next lab session reaps what a killed one left
    (its owner PID is gone), so leaks never pile up."""
    proc, sid, ready = _start_inner(tmp_path, "hang")
    _wait_ready(proc, ready)
    proc.kill()
    proc.communicate(timeout=30)
    left = leftovers(sid)
    assert any(item.startswith("netns") for item in left), left
    assert any(item.startswith("process") for item in left), left
    assert sid in reap_stale()
    assert leftovers(sid) == []
