"""The host half of ``hostcheck selftest --in-container IMAGE``: the GPU stages run inside a
container started through Docker with ``--gpus all``, the path a renter's job takes (the NVIDIA
runtime mounts the driver and the device nodes into it), and come back as data.

The container gets this package and nvidia-ml-py read-only, no network and no new privileges,
and otherwise Docker's defaults, as a renter's has. The image is never pulled (``--pull
never``: pulling is a change the owner makes). Its output is input: bounded in size and time, and read back field by field
(:func:`hostcheck.selftest.results.run_from_dict`). Ctrl-C stops the stages inside, which
free what they allocated; a container that does not end in time is killed.
"""

from __future__ import annotations

import collections
import csv
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcheck.selftest.results import BadRun, Run, run_from_dict
from hostcheck.selftest.worker import BOOTSTRAP, FORMAT

START_S = 60.0  # the container's own start, beside the stages' longest time
STOP_GRACE_S = 30.0  # after Ctrl-C, for the stages inside to free what they hold
MAX_OUTPUT = 16 << 20
ERROR_TAIL = 600
LINE_LIMIT = 4096
INSIDE = "/opt/hostcheck-selftest"
FROM_CONTAINER = ("cuda_version", "gpus", "peers", "nccl", "nccl_gbps", "nccl_error", "stopped", "error",
                  "skipped", "released", "seconds")
"""What the stages inside measured; the host keeps the rest (the preflight, the driver it
collected, the kernel log it reads itself)."""


@dataclass
class Outcome:
    started: bool  # Docker started the container (False: its own error is in ``error``)
    error: str = ""
    run: Run | None = None  # what the stages measured inside; None when nothing came back
    interrupted: bool = False


IMAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,255}")
"""Docker's reference grammar, loosely (registry, path, tag, digest): never an option, a space
or a control character."""


def image_problem(image: str) -> str:
    """Why ``image`` cannot be handed to ``docker run`` as an image name ("" when it can)."""
    return "" if IMAGE_NAME.fullmatch(image) else f"not an image name: {image[:80]!r}"


def mounts() -> list[tuple[str, str]]:
    """(host path, path inside) of what the worker imports: this package, and nvidia-ml-py
    where it is installed."""
    package = Path(__file__).resolve().parents[1]
    pairs = [(str(package), f"{INSIDE}/hostcheck")]
    spec = importlib.util.find_spec("pynvml")
    if spec is not None and spec.origin:
        origin = Path(spec.origin).resolve()
        if origin.name == "__init__.py":
            pairs.append((str(origin.parent), f"{INSIDE}/pynvml"))
        else:
            pairs.append((str(origin), f"{INSIDE}/{origin.name}"))
    return pairs


def job(minutes: float, vram_share: float, max_temp_c: int | None, temperature_margin_c: int,
        cuda_library: str) -> str:
    return json.dumps({"minutes": minutes, "vram_share": vram_share, "max_temp_c": max_temp_c,
                       "temperature_margin_c": temperature_margin_c, "cuda_library": cuda_library})


def _bind(host: str, inside: str) -> str:
    """A read-only bind in --mount's CSV form, which quotes what -v's colons cannot carry."""
    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow(["type=bind", f"source={host}", f"target={inside}", "readonly"])
    return line.getvalue()


def docker_argv(docker: str, image: str, name: str, job_json: str) -> list[str]:
    volumes = [arg for host, inside in mounts() for arg in ("--mount", _bind(host, inside))]
    return [docker, "run", "--rm", "--pull", "never", "--name", name, "--gpus", "all",
            "-e", "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            "--network", "none", "--security-opt", "no-new-privileges",
            *volumes, "-e", f"PYTHONPATH={INSIDE}", "-e", "PYTHONDONTWRITEBYTECODE=1",
            "--entrypoint", "python3", image, "-c", BOOTSTRAP, job_json]


def run_in_container(image: str, job_json: str, limit_s: float, progress: Callable[[str], None]) -> Outcome:
    """The stages inside ``image``, started as a renter's container is."""
    problem = image_problem(image)
    docker = shutil.which("docker")
    if problem or docker is None:
        return Outcome(started=False, error=problem or "docker is not installed")
    name = f"hostcheck-selftest-{os.getpid()}"

    def stop(process: subprocess.Popen[bytes], hard: bool) -> None:
        command = [docker, "kill", name] if hard else [docker, "kill", "--signal", "INT", name]
        try:
            subprocess.run(command, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if hard:
            process.kill()

    return run_worker(docker_argv(docker, image, name, job_json), limit_s + START_S, progress, stop)


def _signal(process: subprocess.Popen[bytes], hard: bool) -> None:
    process.kill() if hard else process.send_signal(signal.SIGINT)


def run_worker(argv: list[str], limit_s: float, progress: Callable[[str], None],
               stop: Callable[[subprocess.Popen[bytes], bool], None] = _signal) -> Outcome:
    """Run the worker's command, pass its progress lines on, and read its result."""
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return Outcome(started=False, error=f"{argv[0]} could not run: {exc.strerror or exc}")
    out = bytearray()
    tail: collections.deque[str] = collections.deque(maxlen=20)
    assert process.stdout is not None and process.stderr is not None

    def read_out(stream: Any) -> None:
        while chunk := stream.read(1 << 16):
            if len(out) <= MAX_OUTPUT:
                out.extend(chunk)

    def read_err(stream: Any) -> None:
        while raw := stream.readline(LINE_LIMIT):  # a line without an end is read a piece at a time
            line = raw[:400].decode("utf-8", "replace").rstrip()
            if line.startswith("progress "):
                progress(line[len("progress "):][:200])
            elif line:
                tail.append(line)

    readers = [threading.Thread(target=read_out, args=(process.stdout,), daemon=True),
               threading.Thread(target=read_err, args=(process.stderr,), daemon=True)]
    for reader in readers:
        reader.start()
    interrupted, timed_out = False, False
    deadline = limit_s
    while True:
        try:
            process.wait(timeout=deadline)
            break
        except KeyboardInterrupt:
            if interrupted:
                stop(process, True)
                continue
            interrupted, deadline = True, STOP_GRACE_S
            stop(process, False)
        except subprocess.TimeoutExpired:
            timed_out = not interrupted
            stop(process, True)
            process.wait()
            break
    for reader in readers:
        reader.join(timeout=5)
    said = " ".join(tail)[-ERROR_TAIL:]
    outcome = read_result(process.returncode, bytes(out), said)
    outcome.interrupted = interrupted
    if timed_out:
        outcome.error = (f"the container did not end within {limit_s:.0f} s (the run's longest time and a margin) "
                         "and was killed; the GPU may have stopped answering: look at the kernel log (journalctl -k)")
    return outcome


def read_result(status: int, out: bytes, said: str) -> Outcome:
    """The worker's one line of JSON, or Docker's own words where there is none."""
    if len(out) > MAX_OUTPUT:
        return Outcome(started=True, error=f"the container wrote more than {MAX_OUTPUT >> 20} MiB: not read")
    line = next((text for text in reversed(out.decode("utf-8", "replace").splitlines()) if text.strip()), "")
    try:
        document = json.loads(line) if line else None
    except (ValueError, RecursionError):
        document = None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        if status == 125:  # docker run's own status when the daemon could not create or start it
            return Outcome(started=False, error=said or "docker run failed (status 125)")
        if status in (126, 127):
            return Outcome(started=True, error=f"the image's python3 could not run the stages: {said}")
        return Outcome(started=True, error=f"the stages inside gave no result (status {status}): {said}".rstrip(": "))
    if "error" in document:
        return Outcome(started=True, error=str(document["error"])[:300])
    try:
        return Outcome(started=True, run=run_from_dict(document.get("run")))
    except BadRun as exc:
        return Outcome(started=True, error=f"the container's result is not a self-test run: {exc}")


def merge(run: Run, inside: Run) -> None:
    """What the stages measured inside, into the host's run."""
    for name in FROM_CONTAINER:
        setattr(run, name, getattr(inside, name))
