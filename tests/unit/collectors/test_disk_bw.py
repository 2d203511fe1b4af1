"""disk_bw with the real fio on a real file on this machine's disk, bounded in time; and the ways
it can fail (no fio, fio hung, unwritable directory), none of which may leave the test file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcheck.collectors.disk_bw import (
    FIO_INSTALL_HINT,
    MIB,
    TEST_FILE_PREFIX,
    VAST_JOB,
    fio_command,
    measure_disk_bw,
    parse_fio_json,
    run_fio,
    target_directory,
)
from hostcheck.facts import Unknown
from tests.unprivileged import python_as_nobody

FIO = shutil.which("fio")
needs_fio = pytest.mark.skipif(FIO is None, reason="fio is not installed (scripts/test installs it)")


@pytest.fixture
def disk_dir() -> Iterator[Path]:
    """A directory on this machine's disk (not tmpfs: O_DIRECT reads must reach a block device)."""
    path = Path(tempfile.mkdtemp(prefix="hostcheck-disk_bw-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def leftovers(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if n.startswith(TEST_FILE_PREFIX)]


def test_the_job_is_vasts() -> None:
    """Vast's send_mach_info.py read job, flag by flag (see the collector's docstring for the source)."""
    vast = ("--numjobs=16 --ioengine=libaio --direct=1 --verify=0 --bs=32k --iodepth=64 --readwrite=randread "
            "--time_based --runtime=1.0s --group_reporting=1 --iodepth_batch_submit=64 --iodepth_batch_complete_max=64")
    ours = [f"--{k}" if v is None else f"--{k}={v}" for k, v in VAST_JOB]
    assert ours == vast.split()
    cmd = fio_command("fio", "/x/f", 256 * MIB)
    assert "--readonly" in cmd and "--filename=/x/f" in cmd and f"--size={256 * MIB}" in cmd
    assert not any(a.startswith("--directory") for a in cmd)


def test_parse_reports_mib_per_second() -> None:
    # fio's JSON bw_bytes is bytes/s; Vast reads the human "bw=...MiB/s": MiB/s = bytes/s / 2**20.
    doc = {"fio version": "fio-3.33", "jobs": [{"jobname": "x", "error": 0, "read": {"bw_bytes": 734003200}}]}
    assert parse_fio_json("note: both iodepth_batch options\n" + json.dumps(doc)) == round(734003200 / 2**20, 1)
    assert isinstance(parse_fio_json("fio: something broke"), Unknown)
    assert isinstance(parse_fio_json(json.dumps({"jobs": []})), Unknown)
    zero = {"jobs": [{"error": 0, "read": {"bw_bytes": 0}}]}
    assert isinstance(parse_fio_json(json.dumps(zero)), Unknown)


@needs_fio
def test_real_fio_on_a_real_file(disk_dir: Path) -> None:
    started = time.monotonic()
    result = measure_disk_bw(str(disk_dir), "test dir", size_mib=64, runtime_s=1.0, timeout_s=20)
    took = time.monotonic() - started
    assert not isinstance(result.mib_s, Unknown), result.mib_s
    assert result.mib_s > 0
    assert result.bytes_written == 64 * MIB and result.file_removed
    assert leftovers(disk_dir) == []
    assert took < 20
    assert "--readonly" in result.command and result.fio_version and result.fio_version.startswith("fio-")


def test_no_fio_on_path_says_how_to_get_it(disk_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(disk_dir))  # an empty directory: no fio on PATH
    result = measure_disk_bw(str(disk_dir), "", size_mib=64)
    assert isinstance(result.mib_s, Unknown)
    assert "fio is not installed" in result.mib_s.reason and FIO_INSTALL_HINT in result.mib_s.reason
    assert result.bytes_written == 0 and leftovers(disk_dir) == []


@needs_fio
def test_fio_past_its_time_limit_is_stopped(disk_dir: Path) -> None:
    data = disk_dir / "data"
    data.write_bytes(os.urandom(64 * MIB))
    assert FIO is not None
    started = time.monotonic()
    value, _ = run_fio(str(data), 64 * MIB, fio=FIO, runtime_s=8.0, timeout_s=1.0)
    assert time.monotonic() - started < 5
    assert isinstance(value, Unknown) and "did not finish within 1 s" in value.reason
    # All 16 job processes went with it: nothing of ours still holds the file open.
    time.sleep(0.2)
    holders = subprocess.run(["fuser", str(data)], capture_output=True, text=True, check=False)
    assert holders.stdout.strip() == ""


def test_hung_fio_still_removes_the_test_file(disk_dir: Path) -> None:
    """A fio that never answers (stand-in script: a hang cannot be produced on demand with the
    real one) is stopped at the time limit, and the test file goes with it."""
    hung = disk_dir / "fio"
    hung.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo fio-hung; exit 0; }\nexec sleep 60\n")
    hung.chmod(0o755)
    started = time.monotonic()
    result = measure_disk_bw(str(disk_dir), "", size_mib=64, runtime_s=0.5, timeout_s=3, fio=str(hung))
    assert time.monotonic() - started < 10
    assert isinstance(result.mib_s, Unknown) and "did not finish" in result.mib_s.reason
    assert result.file_removed and leftovers(disk_dir) == []


PROBE = """
import sys
from hostcheck.collectors.disk_bw import measure_disk_bw
r = measure_disk_bw(sys.argv[1], "", size_mib=64)
print(r.mib_s.reason if hasattr(r.mib_s, "reason") else r.mib_s)
"""


def test_unwritable_directory_is_unknown(disk_dir: Path) -> None:
    os.chmod(disk_dir, 0o555)
    os.chmod(disk_dir.parent, os.stat(disk_dir.parent).st_mode)  # /var/tmp is world-traversable
    out = python_as_nobody(PROBE, str(disk_dir), imports=("hostcheck.collectors.disk_bw",))  # root writes anywhere: ask as an unprivileged user
    os.chmod(disk_dir, 0o755)
    assert out.returncode == 0, out.stderr
    if shutil.which("fio") is None:
        assert "fio is not installed" in out.stdout
    else:
        assert "cannot write a test file" in out.stdout and "Permission denied" in out.stdout
    assert leftovers(disk_dir) == []


def test_bounds_are_refused(disk_dir: Path) -> None:
    cases: list[dict[str, Any]] = [
        {"size_mib": 4}, {"size_mib": 4096}, {"runtime_s": 0.0}, {"runtime_s": 2.0, "timeout_s": 1.0},
    ]
    for kwargs in cases:
        with pytest.raises(ValueError):
            measure_disk_bw(str(disk_dir), "", **kwargs)


def test_target_is_docker_root_or_its_parent_said_so(disk_dir: Path) -> None:
    assert target_directory(str(disk_dir)) == (str(disk_dir), f"on Docker's data root {disk_dir}")
    missing = disk_dir / "docker" / "nested"
    where = target_directory(str(missing))
    assert not isinstance(where, Unknown)
    assert where[0] == str(disk_dir)
    assert "does not exist yet" in where[1] and str(disk_dir) in where[1]
    assert isinstance(target_directory(Unknown("docker.data_root unreadable")), Unknown)
    assert isinstance(target_directory("relative/docker"), Unknown)


TMPFS_PROBE = """
import sys
from hostcheck.collectors.disk_bw import measure_disk_bw
r = measure_disk_bw(sys.argv[1], "", size_mib=64)
print(r.bytes_written, r.mib_s.reason if hasattr(r.mib_s, "reason") else r.mib_s)
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="a small filesystem of its own needs a private mount namespace (root)")
def test_too_little_free_space_writes_nothing(disk_dir: Path) -> None:
    """A 200 MiB tmpfs in a mount namespace of the test's own (gone when the process ends): the
    64 MiB file plus the 1 GiB margin does not fit, so nothing is written."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    script = f'mount -t tmpfs -o size=200m hostcheck-test "$1" && exec "{sys.executable}" -c "$2" "$1"'
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                          str(disk_dir), TMPFS_PROBE], capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 0, out.stderr
    written, _, reason = out.stdout.strip().partition(" ")
    assert written == "0"
    if shutil.which("fio") is None:
        assert "fio is not installed" in reason
    else:
        assert "MiB free" in reason and "nothing was written" in reason


def test_the_audit_never_measures_the_disk() -> None:
    from hostcheck.collectors import collector_modules

    assert "hostcheck.collectors.disk_bw" not in collector_modules()
    assert "hostcheck.collectors.power_draw" not in collector_modules()
    assert "hostcheck.collectors.gpu" in collector_modules()
