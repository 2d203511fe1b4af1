"""Install this source tree's hostcheck into a lab host, offline inside the host.

Wheels are prepared on this machine: the dependencies once per dependency list (cached in
``<cache>/wheels-<hash>``, the only step that talks to PyPI), hostcheck itself from the
working tree once per test process (it is what is under test; a pure-Python wheel, the same
for every host Python). The host gets them over scp and
installs with ``pip --no-index`` into ``/opt/hostcheck`` (Debian's python3 -m venv): no
PyPI traffic from the lab network, ~10 s.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import shutil
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from tests.lab import timing
from tests.lab.remote import RemoteHost
from tests.lab.rootfs import cache_dir, cache_lock
from tests.lab.util import log, run

REPO = Path(__file__).resolve().parents[2]
VENV = "/opt/hostcheck"


def _requirements() -> tuple[list[str], list[str]]:
    """(runtime dependencies, build requirements) from pyproject.toml."""
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    runtime = sorted(data["project"].get("dependencies", []))
    # setuptools < 70 needs the separate wheel package for bdist_wheel
    build = sorted({*data.get("build-system", {}).get("requires", ["setuptools"]), "wheel"})
    return runtime, build


def dependency_wheels(python: str = "3.11") -> Path:
    """Cached folder of wheels for hostcheck's dependencies, for CPython ``python`` x86_64
    glibc (3.11: this machine and Debian 12 lab hosts; 3.13: Debian 13). The key covers the
    dependency list and the Python version."""
    deps, build = _requirements()
    # 3.11 keeps the key it always had, so existing caches stay warm
    salt = [] if python == "3.11" else [f"--python--{python}"]
    key = hashlib.sha256("\n".join(deps + ["--build--"] + build + salt).encode()).hexdigest()[:12]
    folder = cache_dir() / f"wheels-{key}"
    started = time.monotonic()
    with cache_lock(f"wheels-{key}"):
        if (folder / ".complete").exists():
            timing.record_cache(f"wheels py{python}", "warm", time.monotonic() - started, key)
            return folder
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        log(f"downloading {len(deps)} dependencies' wheels into {folder}")
        target = ["--only-binary=:all:", "--python-version", python, "--platform", "manylinux2014_x86_64",
                  "--platform", "linux_x86_64", "--implementation", "cp"]
        run([sys.executable, "-m", "pip", "download", "--quiet", *target, "--dest", str(partial), *deps], timeout=600)
        # build requirements separately: building hostcheck's wheel then needs no network either
        run([sys.executable, "-m", "pip", "download", "--quiet", *target, "--dest", str(partial / "build"), *build],
            timeout=600)
        (partial / ".complete").write_text("\n".join(deps) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    timing.record_cache(f"wheels py{python}", "cold", time.monotonic() - started, key)
    return folder


def build_wheelhouse(into: Path, python: str = "3.11") -> Path:
    """``into`` filled with the dependency wheels (for the hosts' CPython ``python``: see
    ``Rootfs.python``) plus a fresh wheel of this tree."""
    into.mkdir(parents=True, exist_ok=True)
    for wheel in [*dependency_wheels(python).glob("*.whl"), _tree_wheel(python)]:
        shutil.copy2(wheel, into / wheel.name)
    return into


@functools.cache
def _tree_wheel(python: str) -> Path:
    """A wheel of this tree, built once per process (pure Python: any host Python takes it)."""
    out = Path(tempfile.mkdtemp(prefix="hcl-tree-wheel-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="hcl-build-") as build:
        # a copy, so building never leaves build/ or *.egg-info in the shared working tree
        src = Path(build) / "src"
        shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info",
                                                                 "__pycache__", ".pytest_cache", "tests"))
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
             "--find-links", str(dependency_wheels(python) / "build"), "--wheel-dir", str(out), str(src)], timeout=300)
    (wheel,) = out.glob("hostcheck-*.whl")
    return wheel


def install_hostcheck(host: RemoteHost, wheelhouse: Path) -> dict[str, float]:
    """Copy ``wheelhouse`` to ``host`` and install hostcheck into /opt/hostcheck; timings."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    remote = f"/tmp/hostcheck-wheels-{host.incarnation}"
    host.put(wheelhouse, remote)
    timings["copy"] = time.monotonic() - started
    started = time.monotonic()
    host.sudo(f"python3 -m venv {VENV} && {VENV}/bin/pip install --quiet --no-index --find-links {remote} "
              f"hostcheck && rm -rf {remote}", check=True, timeout=300)
    timings["install"] = time.monotonic() - started
    return timings
