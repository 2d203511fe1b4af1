"""The host around the self-test: the kernel's log lines since the run started (for Xid and
AER lines), and a container started through Docker with the NVIDIA runtime, as a renter's is.
Both bounded in time and size."""

from __future__ import annotations

import shutil
import subprocess

TIMEOUT_S = 15.0
MAX_BYTES = 2 << 20
DOCKER_TIMEOUT_S = 180.0


def journal_kernel_lines(since: float) -> list[str] | str:
    """The kernel's lines since ``since`` (epoch seconds), or why they could not be read."""
    journalctl = shutil.which("journalctl")
    if journalctl is None:
        return "journalctl is not installed: the kernel log was not read"
    try:
        done = subprocess.run([journalctl, "-k", "--no-pager", "-o", "cat", "--since", f"@{int(since) - 1}"],
                              capture_output=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return f"journalctl did not answer in {TIMEOUT_S:g} s"
    except OSError as exc:
        return f"journalctl could not run: {exc.strerror or exc}"
    if done.returncode != 0:
        said = done.stderr[:300].decode("utf-8", "replace").strip()
        return f"journalctl -k failed: {said or done.returncode} (run as root, or in the adm or systemd-journal group)"
    return done.stdout[-MAX_BYTES:].decode("utf-8", "replace").splitlines()


def docker_run(image: str) -> tuple[int, str]:
    """Start ``image`` with ``--gpus all`` and run ``nvidia-smi -L`` in it (the NVIDIA container
    runtime mounts it, with libcuda, into every GPU container): (status, Docker's own words)."""
    if image.startswith("-") or any(c.isspace() for c in image) or len(image) > 256:
        return 2, f"not an image name: {image[:80]!r}"
    docker = shutil.which("docker")
    if docker is None:
        return 127, "docker is not installed"
    try:
        done = subprocess.run([docker, "run", "--rm", "--gpus", "all", "--entrypoint", "nvidia-smi", image, "-L"],
                              capture_output=True, timeout=DOCKER_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"docker run did not finish in {DOCKER_TIMEOUT_S:g} s"
    except OSError as exc:
        return 126, f"docker could not run: {exc.strerror or exc}"
    said = (done.stderr or done.stdout)[-600:].decode("utf-8", "replace").strip()
    return done.returncode, said
