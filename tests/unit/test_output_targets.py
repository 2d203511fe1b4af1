"""`--output` never replaces what it names unless that is a regular file (or nothing yet).

Real targets: device nodes made with mknod, FIFOs, a listening Unix socket, symlinks, a full
tmpfs in a private mount namespace; the real CLI in a fresh process. The rule under test
(hostcheck.safeio.plan_output): a new path or a regular file is replaced atomically; a
character device or FIFO is written through; a symlink is followed only when every link is
owned by the caller or root; anything else is refused with exit 2 naming what it is.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, SNAPSHOTS, hostcheck

SNAP = str(SNAPSHOTS / "dedicated-4090.json")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mknod, lchown and mount namespaces need root (CI runs as root)")


def audit_to(out: str | Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return hostcheck("audit", "--facts", SNAP, "-f", "json", "-o", str(out), *extra)


def is_report(text: str) -> bool:
    return json.loads(text)["report_version"] == 1


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ---------------------------------------------------------------- written through

@root_only
def test_a_copy_of_dev_null_stays_a_character_device(tmp_path: Path) -> None:
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    before = os.lstat(null)
    proc = audit_to(null)
    assert proc.returncode in (0, 3, 4), proc.stderr
    info = os.lstat(null)
    assert stat.S_ISCHR(info.st_mode) and (os.major(info.st_rdev), os.minor(info.st_rdev)) == (1, 3)
    assert (info.st_ino, info.st_mode, info.st_uid) == (before.st_ino, before.st_mode, before.st_uid)
    assert f"wrote {null} (a character device)" in proc.stderr
    assert proc.stdout == "" and entries(tmp_path) == ["null"]


@root_only
def test_a_full_device_is_an_error_never_wrote(tmp_path: Path) -> None:
    full = tmp_path / "full"
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))  # /dev/full: every write is ENOSPC
    proc = audit_to(full)
    assert proc.returncode == 2
    assert f"cannot write {full}: No space left on device" in proc.stderr
    assert "wrote" not in proc.stderr
    assert is_report(proc.stdout)  # nothing lost: the report came out on stdout
    assert stat.S_ISCHR(os.lstat(full).st_mode) and entries(tmp_path) == ["full"]


def test_a_fifo_with_a_reader_receives_the_report(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as fh:  # blocks until the writer opens, reads to its close
            received.append(fh.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    time.sleep(0.2)  # the reader is waiting in open() before the writer arrives
    proc = audit_to(fifo)
    thread.join(10)
    assert proc.returncode in (0, 3, 4), proc.stderr
    assert received and is_report(received[0].decode())
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and entries(tmp_path) == ["pipe"]
    assert f"wrote {fifo} (a FIFO)" in proc.stderr


def test_a_fifo_without_a_reader_is_a_clear_error_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    proc = hostcheck("audit", "--facts", SNAP, "-f", "json", "-o", str(fifo), timeout=30)
    elapsed = time.monotonic() - started
    assert proc.returncode == 2
    assert "a FIFO with no reader" in proc.stderr and "wrote" not in proc.stderr
    assert elapsed < 20  # a blocking open() would hang until the 30 s subprocess timeout
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and entries(tmp_path) == ["pipe"]


def test_a_symlink_to_our_own_stdout_writes_to_stdout(tmp_path: Path) -> None:
    link = tmp_path / "out"
    link.symlink_to("/proc/self/fd/1")  # made by us, so owned by the caller
    proc = audit_to(link)  # stdout is a pipe to this test
    assert proc.returncode in (0, 3, 4), proc.stderr
    assert is_report(proc.stdout)
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    proc = audit_to("/dev/stdout")
    assert proc.returncode in (0, 3, 4), proc.stderr
    assert is_report(proc.stdout)


def test_dev_stdout_redirected_to_a_file_appends_and_never_truncates(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("earlier line\n")
    with open(log, "ab") as fh:  # the shell's `>> log`
        proc = subprocess.run(
            [sys.executable, "-m", "hostcheck.cli", "audit", "--facts", SNAP, "-f", "json", "-o", "/dev/stdout"],
            stdout=fh, stderr=subprocess.PIPE, text=True, timeout=60, cwd=REPO,
        )
    assert proc.returncode in (0, 3, 4), proc.stderr
    first, rest = log.read_text().split("\n", 1)
    assert first == "earlier line" and is_report(rest)
    assert entries(tmp_path) == ["log"]


def test_dash_means_standard_output() -> None:
    assert not (REPO / "-").exists()
    proc = audit_to("-")
    assert proc.returncode in (0, 3, 4), proc.stderr
    assert is_report(proc.stdout)
    assert "wrote" not in proc.stderr
    assert not (REPO / "-").exists()


# ---------------------------------------------------------------- refused

def test_a_directory_is_refused_before_any_work(tmp_path: Path) -> None:
    target = tmp_path / "reports"
    target.mkdir()
    for command in (["audit", "--facts", SNAP], ["facts", "--offline"], ["fleet", str(REPO / "tests" / "fleet")]):
        proc = hostcheck(*command, "-o", str(target))
        assert proc.returncode == 2, (command, proc.stderr)
        assert f"--output {target}: {target} is a directory" in proc.stderr
        assert proc.stdout == ""
    assert target.is_dir() and entries(target) == []


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        server.listen(1)
        proc = audit_to(path)
        assert proc.returncode == 2
        assert f"{path} is a socket" in proc.stderr and "wrote" not in proc.stderr
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        server.close()


@root_only
def test_a_block_device_is_refused(tmp_path: Path) -> None:
    block = tmp_path / "loop"
    os.mknod(block, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    proc = audit_to(block)
    assert proc.returncode == 2 and f"{block} is a block device" in proc.stderr
    assert stat.S_ISBLK(os.lstat(block).st_mode) and entries(tmp_path) == ["loop"]


def test_a_dangling_symlink_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    link = tmp_path / "report.json"
    link.symlink_to(tmp_path / "would-be-created")
    proc = audit_to(link)
    assert proc.returncode == 2 and "a dangling symlink" in proc.stderr
    assert link.is_symlink() and entries(tmp_path) == ["report.json"]


@root_only
def test_a_symlink_owned_by_someone_else_is_not_followed(tmp_path: Path) -> None:
    precious = tmp_path / "shadow"
    precious.write_text("keep me")
    trap = tmp_path / "report.json"  # what another user could plant in /tmp
    trap.symlink_to(precious)
    os.lchown(trap, 65534, 65534)
    proc = audit_to(trap)
    assert proc.returncode == 2
    assert "owned by uid 65534, not by you or root: it is not followed" in proc.stderr
    assert precious.read_text() == "keep me" and trap.is_symlink()
    assert entries(tmp_path) == ["report.json", "shadow"]


# ---------------------------------------------------------------- replaced atomically

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_regular_file_is_replaced_atomically_with_the_right_mode(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    out.write_text("old report")
    os.chmod(out, 0o644)
    held = tmp_path / "reader-holds-this"  # a reader that opened the old file keeps the old file
    os.link(out, held)
    proc = audit_to(out)
    assert proc.returncode in (0, 3, 4), proc.stderr
    assert is_report(out.read_text()) and f"wrote {out}\n" in proc.stderr
    assert held.read_text() == "old report"  # a new inode was renamed in; the old one untouched
    assert os.stat(out).st_ino != os.stat(held).st_ino
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600  # unredacted: owner only, whatever was there
    proc = audit_to(out, "--redact")
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o666 & ~_umask()
    assert entries(tmp_path) == ["reader-holds-this", "report.json"]  # no temporary file left


def test_a_symlink_of_ours_to_a_regular_file_replaces_that_file_and_keeps_the_link(tmp_path: Path) -> None:
    target = tmp_path / "reports" / "latest.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(Path("reports") / "latest.json")
    proc = audit_to(link)
    assert proc.returncode in (0, 3, 4), proc.stderr
    assert link.is_symlink() and is_report(target.read_text())
    assert entries(target.parent) == ["latest.json"]


@root_only
def test_a_failed_atomic_write_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    """ENOSPC half way: a 64 KiB tmpfs in a private mount namespace, nearly filled."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    script = (
        'mount -t tmpfs -o size=64k tmpfs "$1" && printf "old report" > "$1/report.json" && '
        'head -c 53248 /dev/zero > "$1/filler" 2>/dev/null; '
        '"$2" -m hostcheck.cli audit --facts "$3" -f json -o "$1/report.json" >/dev/null; echo "rc=$?"; '
        'cat "$1/report.json"; echo; ls -A "$1"'
    )
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(mnt), sys.executable, SNAP],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["rc=2", "old report"], (proc.stdout, proc.stderr)
    assert sorted(lines[2:]) == ["filler", "report.json"]  # no .report.json.*.tmp left behind
    assert "No space left on device" in proc.stderr and "wrote" not in proc.stderr


def test_a_fifo_whose_reader_stops_reading_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that opens the FIFO and never reads: the write gives up instead of hanging."""
    from hostcheck import safeio

    monkeypatch.setattr(safeio, "FIFO_STALL_S", 0.5)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader that never reads
    try:
        started = time.monotonic()
        with pytest.raises(OSError, match="the FIFO's reader took nothing for 0.5 s"):
            safeio.write_output(fifo, "x" * (1 << 20), private=True)  # 1 MiB: far over a pipe's buffer
        assert time.monotonic() - started < 5
    finally:
        os.close(reader_fd)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and entries(tmp_path) == ["pipe"]
