"""Disk read bandwidth the way Vast measures ``disk_bw``: fio random reads of 32 KiB blocks,
16 jobs x iodepth 64, O_DIRECT, for about one second.

Vast's host script ``send_mach_info.py`` (first-party code, run on each Vast host) runs the job
below. No first-party copy of that script was found in the public sources searched (vast-ai's
vast-cli, vast-python and docs repositories hold no fio job; read 2026-12-03), so the job is
modelled on a third-party copy of it: the script embedded in chenshaoquan/chaojiniubipuls
``nichousha.sh`` (commit 342fab5), which replaces Vast's speed test with made-up figures. Its fio
line is the same, character for character, in the other third-party copies found; whether it
still matches Vast's current script cannot be checked. The line, without its leading ``sudo``::

    fio --numjobs=16 --ioengine=libaio --direct=1 --verify=0 --name=read_test
        --directory=/var/lib/docker --bs=32k --iodepth=64 --size=128MB --readwrite=randread
        --time_based --runtime=1.0s --group_reporting=1 --iodepth_batch_submit=64
        --iodepth_batch_complete_max=64

and reads the group's ``bw=...MiB/s`` (GiB/s times 1024): Vast's ``disk_bw`` is MiB/s, although
its offer documentation says MB/s. Vast's job lays out 16 files of 128 MiB in the Docker data
root (2 GiB written). hostcheck runs the same job on one preallocated file of bounded size that
all 16 jobs read (``--readonly``), and removes the file afterwards, on failure and on timeout
too. Writing that file is the only change to the machine; ``hostcheck audit`` never calls this.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hostcheck.errors import InputError
from hostcheck.facts import Unknown

MIB = 1 << 20
DEFAULT_SIZE_MIB = 256
MIN_SIZE_MIB = 64
MAX_SIZE_MIB = 1024
FREE_MARGIN_BYTES = 1 << 30  # leave at least this much free after writing the test file
DEFAULT_RUNTIME_S = 1.0
DEFAULT_TIMEOUT_S = 30.0
FIO_INSTALL_HINT = "install it with `sudo apt install fio` (Debian, Ubuntu)"
TEST_FILE_PREFIX = ".hostcheck-disk_bw-"

# Vast's read job, option by option (the source is cited in the module docstring); only
# --directory/--size/--name are replaced by one shared, preallocated, read-only file.
VAST_JOB: tuple[tuple[str, str | None], ...] = (
    ("numjobs", "16"),
    ("ioengine", "libaio"),
    ("direct", "1"),
    ("verify", "0"),
    ("bs", "32k"),
    ("iodepth", "64"),
    ("readwrite", "randread"),
    ("time_based", None),
    ("runtime", "1.0s"),
    ("group_reporting", "1"),
    ("iodepth_batch_submit", "64"),
    ("iodepth_batch_complete_max", "64"),
)
VAST_JOB_SOURCE = (
    "the fio read job of Vast's host script send_mach_info.py (1P code; no 1P copy found), read in a 3P copy: "
    "chenshaoquan/chaojiniubipuls nichousha.sh (a script that fakes Vast's speed test)"
)
VAST_JOB_URL = "https://github.com/chenshaoquan/chaojiniubipuls/blob/342fab589cad648b7698a035d2710c2b8b730c99/nichousha.sh"
VAST_JOB_CHECKED = "2026-12-03"


@dataclass(frozen=True)
class DiskBandwidth:
    """One ``disk_bw`` measurement, or Unknown and why; what was written, and whether it is gone."""

    mib_s: float | Unknown
    directory: str | None
    note: str
    bytes_written: int = 0
    file_removed: bool = True
    seconds: float = 0.0
    fio_version: str | None = None
    command: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "mib_s": None if isinstance(self.mib_s, Unknown) else self.mib_s,
            "reason": self.mib_s.reason if isinstance(self.mib_s, Unknown) else None,
            "directory": self.directory,
            "note": self.note,
            "bytes_written": self.bytes_written,
            "file_removed": self.file_removed,
            "seconds": self.seconds,
            "fio_version": self.fio_version,
            "command": self.command,
        }


def fio_command(fio: str, path: str, size_bytes: int, runtime_s: float = DEFAULT_RUNTIME_S) -> list[str]:
    """Vast's read job on the existing file ``path`` (``--readonly``: fio refuses to write it)."""
    args = [fio]
    for key, value in VAST_JOB:
        if key == "runtime":
            value = f"{runtime_s:g}s"
        args.append(f"--{key}" if value is None else f"--{key}={value}")
    return [
        *args,
        "--name=hostcheck_disk_bw",
        f"--filename={path}",
        f"--size={size_bytes}",
        "--readonly",
        "--output-format=json",
    ]


def parse_fio_json(text: str) -> float | Unknown:
    """MiB/s read by all jobs together (``group_reporting``: one job entry) from fio's JSON."""
    start = text.find("{")  # fio may print notes before the JSON document
    if start < 0:
        return Unknown("fio printed no JSON result")
    try:
        doc = json.loads(text[start:])
        jobs = doc["jobs"]
        read = jobs[0]["read"]
        bw_bytes = float(read["bw_bytes"])
        errors = [int(job.get("error", 0)) for job in jobs]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return Unknown(f"fio's JSON result has no read bandwidth ({type(exc).__name__}: {exc})")
    if any(errors):
        return Unknown(f"fio reported error {max(errors)} for the read job")
    if not math.isfinite(bw_bytes) or bw_bytes <= 0:
        return Unknown("fio read nothing in the time allowed")
    return round(bw_bytes / MIB, 1)


def fio_version(fio: str) -> str | None:
    try:
        out = subprocess.run([fio, "--version"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()[:40] or None


def _children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (fio's job processes)."""
    kids = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read(1024).decode("ascii", "replace")
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(pid):
            kids.append(int(entry))
    return kids


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a zombie (exited, not yet reaped by init) no longer reads anything
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read(1024).rsplit(b")", 1)[-1].split()[:1] == [b"Z"]
    except OSError:
        return True


def _stop_fio(proc: subprocess.Popen[str], grace_s: float = 3.0, wait_s: float = 10.0) -> None:
    """Stop fio and its job processes, and wait until they are gone. Each job calls setsid(), so a
    process-group kill misses them: SIGTERM asks fio to end its jobs itself; what is left after
    the grace period is killed by process id (the jobs fio forked, read from /proc)."""
    kids = _children(proc.pid)
    try:
        proc.terminate()
        proc.communicate(timeout=grace_s)
    except subprocess.TimeoutExpired:
        kids = sorted(set(kids) | set(_children(proc.pid)))
        proc.kill()
        proc.communicate()
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + wait_s
    for kid in kids:
        try:
            os.kill(kid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    while kids and time.monotonic() < deadline:
        kids = [k for k in kids if not _gone(k)]
        if kids:
            time.sleep(0.05)


def run_fio(
    path: str, size_bytes: int, *, fio: str = "fio", runtime_s: float = DEFAULT_RUNTIME_S, timeout_s: float = 15.0
) -> tuple[float | Unknown, list[str]]:
    """Run Vast's read job on an existing file; a run past ``timeout_s`` is killed (all 16 jobs)."""
    command = fio_command(fio, path, size_bytes, runtime_s)
    try:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )  # its own session: a Ctrl-C at the terminal reaches hostcheck, which then stops fio
    except OSError as exc:
        return Unknown(f"cannot run {fio}: {exc.strerror or exc}"), command
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop_fio(proc)
        return Unknown(f"fio did not finish within {timeout_s:g} s and was stopped"), command
    except BaseException:
        _stop_fio(proc)
        raise
    if proc.returncode != 0:
        last = (err.strip().splitlines() or out.strip().splitlines() or ["no output"])[-1]
        return Unknown(f"fio failed (exit {proc.returncode}): {last[:300]}"), command
    return parse_fio_json(out), command


def nearest_existing(path: str) -> str:
    while not os.path.isdir(path) and path not in ("/", ""):
        path = os.path.dirname(path)
    return path or "/"


def target_directory(docker_root: str | Unknown) -> tuple[str, str] | Unknown:
    """Where to measure: Docker's data root, or (when it does not exist yet) its nearest existing
    parent on the same filesystem, which is where the data root would be created."""
    if isinstance(docker_root, Unknown):
        return Unknown(f"cannot tell where Docker keeps its data ({docker_root.reason}); give --disk-dir")
    if not os.path.isabs(docker_root):
        return Unknown(f"Docker's data root {docker_root!r} is not an absolute path; give --disk-dir")
    if os.path.isdir(docker_root):
        return docker_root, f"on Docker's data root {docker_root}"
    parent = nearest_existing(docker_root)
    return parent, (
        f"Docker's data root {docker_root} does not exist yet: measured its nearest existing parent {parent}, "
        "on the filesystem where it would be created"
    )


def _write_test_file(fd: int, size_bytes: int, deadline: float, clock: Callable[[], float]) -> int:
    """Random data (a compressing or deduplicating filesystem must not shortcut the reads)."""
    written = 0
    while written < size_bytes:
        if clock() > deadline:
            raise TimeoutError("writing the test file took longer than the time allowed")
        chunk = os.urandom(min(MIB, size_bytes - written))
        view = memoryview(chunk)
        while view:
            n = os.write(fd, view)
            view = view[n:]
            written += n
    os.fsync(fd)
    return written


def check_size_mib(size_mib: int, what: str = "the test file size") -> None:
    """Refuse a test file size outside MIN_SIZE_MIB-MAX_SIZE_MIB; ``what`` names it."""
    if not MIN_SIZE_MIB <= size_mib <= MAX_SIZE_MIB:
        raise InputError(f"{what} must be {MIN_SIZE_MIB}-{MAX_SIZE_MIB} MiB, not {size_mib}")


def measure_disk_bw(
    directory: str,
    note: str = "",
    *,
    size_mib: int = DEFAULT_SIZE_MIB,
    runtime_s: float = DEFAULT_RUNTIME_S,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fio: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> DiskBandwidth:
    """Write a ``size_mib`` test file in ``directory``, run Vast's read job on it, remove it."""
    check_size_mib(size_mib)
    if not (math.isfinite(runtime_s) and 0.1 <= runtime_s <= 10):
        raise ValueError(f"the fio runtime must be 0.1-10 s, not {runtime_s}")
    if not (math.isfinite(timeout_s) and runtime_s < timeout_s <= 300):
        raise ValueError(f"the time limit must be above the runtime and at most 300 s, not {timeout_s}")
    started = clock()

    def result(value: float | Unknown, **kw: Any) -> DiskBandwidth:
        return DiskBandwidth(value, directory, note, seconds=round(clock() - started, 2), **kw)

    binary = fio or shutil.which("fio")
    if binary is None:
        return result(Unknown(f"fio is not installed: {FIO_INSTALL_HINT}"))
    version = fio_version(binary)
    try:
        st = os.statvfs(directory)
    except OSError as exc:
        return result(Unknown(f"cannot use {directory}: {exc.strerror or exc}"), fio_version=version)
    size = size_mib * MIB
    free = st.f_bavail * st.f_frsize
    if free < size + FREE_MARGIN_BYTES:
        return result(
            Unknown(
                f"only {free / MIB:.0f} MiB free in {directory}: the {size_mib} MiB test file needs that "
                f"plus {FREE_MARGIN_BYTES // MIB} MiB to spare; nothing was written"
            ),
            fio_version=version,
        )
    path = os.path.join(directory, f"{TEST_FILE_PREFIX}{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        return result(
            Unknown(f"cannot write a test file in {directory}: {exc.strerror or exc} (run as a user who may write "
                    "there, e.g. with sudo, or give --disk-dir)"),
            fio_version=version,
        )
    written = 0
    removed = False
    command: list[str] = []
    try:
        try:
            written = _write_test_file(fd, size, started + timeout_s, clock)
        finally:
            os.close(fd)
        left = timeout_s - (clock() - started)
        if left <= runtime_s:
            value: float | Unknown = Unknown(f"no time left for fio within {timeout_s:g} s after writing the test file")
        else:
            value, command = run_fio(path, size, fio=binary, runtime_s=runtime_s, timeout_s=left)
    except OSError as exc:
        value = Unknown(f"writing the test file in {directory} failed: {exc.strerror or exc}")
    except TimeoutError as exc:
        value = Unknown(str(exc))
    finally:
        try:
            os.unlink(path)
            removed = True
        except FileNotFoundError:
            removed = True
        except OSError:
            removed = False
    if not removed and not isinstance(value, Unknown):
        value = Unknown(f"measured, but the test file {path} could not be removed: delete it by hand")
    return result(value, bytes_written=written, file_removed=removed, fio_version=version, command=command)
