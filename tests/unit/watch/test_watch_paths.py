"""Where `hostcheck watch` records by default, and which boot it says it runs in.

The default database: the system one where the user can write it, else
``$XDG_STATE_HOME/hostcheck/watch.db`` (``~/.local/state`` when the variable is unset, the XDG
base directory spec's default), said at start. Run for real as an unprivileged user.

The boot id: the journal's (journald stamps entries with the id it reads unsandboxed); the
lab-host half of that, under the role's own unit settings, is in tests/lanes/profile/test_watch_role.py.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostcheck.recording.store import DEFAULT_DB
from hostcheck.watch.boots import read_boot_id
from tests.helpers import hostcheck
from tests.unprivileged import readable_copy

NOBODY = 65534
# A closed port on loopback: the recording sends nothing off this machine.
RECORD = ["watch", "--for", "1", "--interval", "1", "--target", "tcp:127.0.0.1:9", "--allow-more-traffic"]


def as_nobody() -> list[str]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the recorder as an unprivileged user")
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]


def run_as_nobody(home: Path, args: list[str], **env: str) -> tuple[int, str, str]:
    # A copy of the package nobody can read (the checkout may sit under a 0700 directory), run by
    # the base interpreter (the virtualenv's may sit there too).
    code = readable_copy("hostcheck.cli", "hostcheck.commands.watch", "hostcheck.watch.recorder", "hostcheck.render.watch")
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "COLUMNS": "80",
                   "PYTHONPATH": str(code), **env}
    python = getattr(sys, "_base_executable", sys.executable)
    proc = subprocess.run([*as_nobody(), python, "-s", "-m", "hostcheck.cli", *args], capture_output=True, text=True,
                          timeout=60, env=environment, cwd=home)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def home() -> Iterator[Path]:
    # Under /tmp itself: pytest's own tmp_path sits in a folder only root can enter.
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="hostcheck-watch-home-") as top:
        Path(top).chmod(0o755)
        home = Path(top) / "home"
        home.mkdir()
        os.chown(home, NOBODY, NOBODY)
        yield home


@pytest.mark.parametrize("xdg", [True, False], ids=["XDG_STATE_HOME", "unset"])
def test_unprivileged_user_records_into_its_own_state_directory(home: Path, xdg: bool) -> None:
    if os.access(DEFAULT_DB.parent, os.W_OK) and DEFAULT_DB.parent.stat().st_mode & 0o002:
        pytest.skip(f"{DEFAULT_DB.parent} is writable by anyone here")
    env = {"XDG_STATE_HOME": str(home / "state")} if xdg else {}
    # The rule: $XDG_STATE_HOME/hostcheck/watch.db, else $HOME/.local/state/hostcheck/watch.db.
    expected = (home / "state" if xdg else home / ".local" / "state") / "hostcheck" / "watch.db"
    rc, _, err = run_as_nobody(home, RECORD, **env)
    assert rc == 0, err
    assert f"{DEFAULT_DB} is not writable by this user, so the recording goes to {expected}" in err
    assert expected.is_file() and expected.parent.stat().st_mode & 0o777 == 0o700
    with sqlite3.connect(f"file:{expected}?mode=ro", uri=True) as conn:
        assert conn.execute("select count(*) from samples").fetchone()[0] >= 1
    # The report finds the same database without --db.
    rc, out, err = run_as_nobody(home, ["watch", "report"], **env)
    assert rc == 0, err
    assert " ".join(out.split()[:3]) == f"Reliability rehearsal: {expected}"  # (wrapped to 80 columns)


def test_a_named_db_is_used_as_given(tmp_path: Path) -> None:
    db = tmp_path / "named.db"
    proc = hostcheck(*RECORD, "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert db.is_file() and "is not writable" not in proc.stderr


KERNEL = "0f0e0d0c-0b0a-4908-8706-050403020100"
CONTAINER = "11112222333344445555666677778888"


def boot_id_files(tmp_path: Path, manager: str | None) -> tuple[Path, Path]:
    path = tmp_path / "boot_id"
    path.write_text(KERNEL + "\n")
    mark = tmp_path / "container"
    if manager is not None:
        mark.write_text(manager + "\n")
    return path, mark


def test_boot_id_reads_as_the_journal_has_it(tmp_path: Path) -> None:
    kernel = KERNEL.replace("-", "")
    # Not a container: the kernel's id, whatever the journal's newest boot is (a sandbox cannot
    # change it on a host).
    assert read_boot_id(*boot_id_files(tmp_path, None), journal_boot=CONTAINER) == kernel
    # An nspawn container under ProtectKernelTunables=yes reads the host kernel's id: the
    # journal's newest boot (the container's own id) is the one the journal keys entries by.
    assert read_boot_id(*boot_id_files(tmp_path, "systemd-nspawn"), journal_boot=CONTAINER) == CONTAINER
    # The same container, unsandboxed, reads its own id, which is the journal's.
    assert read_boot_id(*boot_id_files(tmp_path, "systemd-nspawn"), journal_boot=kernel) == kernel
    assert read_boot_id(*boot_id_files(tmp_path, "lxc"), journal_boot=None) == kernel
    # A manager that gives no boot id of its own (docker): the kernel's, plus its PID 1's start
    # (field 22 of /proc/1/stat), so each container boot has a key.
    start = Path("/proc/1/stat").read_text().rsplit(")", 1)[1].split()[19]
    assert read_boot_id(*boot_id_files(tmp_path, "docker"), journal_boot=kernel) == f"{kernel}.{start}"
    assert read_boot_id(*boot_id_files(tmp_path, "docker"), journal_boot=None) == f"{kernel}.{start}"
