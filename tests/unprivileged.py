"""Python code run as the unprivileged user ``nobody``, from a copy it can read.

A test that drops privileges cannot run the checkout's own files: a clone under a 0700 home
directory (Debian's default) or the virtualenv inside it is out of ``nobody``'s reach. The
modules a probe imports (hostcheck and any third-party package it loads) are copied once per
test process into a 0755 temporary directory, and the base interpreter (not the virtualenv's)
runs them from there.
"""

from __future__ import annotations

import atexit
import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from functools import cache
from pathlib import Path

_LOADED = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps({n: getattr(m, "__file__", None) for n, m in list(sys.modules.items()) if "." not in n}))
"""


def _stdlib_dirs() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    return tuple(Path(paths[key]).resolve() for key in ("stdlib", "platstdlib"))


@cache
def readable_copy(*modules: str) -> Path:
    """A 0755 directory holding ``modules`` and every non-stdlib top-level package they load."""
    loaded = subprocess.run([sys.executable, "-c", _LOADED, *modules], capture_output=True, text=True,
                            timeout=60, check=True, cwd="/")
    root = Path(tempfile.mkdtemp(prefix="hostcheck-unprivileged-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    stdlib = _stdlib_dirs()
    for name, file in json.loads(loaded.stdout).items():
        if file is None or name.startswith(("__editable__", "_distutils_hack")):
            continue  # built in, or the virtualenv's own import hooks
        source = Path(file).resolve()
        installed = "site-packages" in source.parts or "dist-packages" in source.parts
        if not installed and any(source.is_relative_to(d) for d in stdlib):
            continue  # the base interpreter has it
        if source.name == "__init__.py":
            shutil.copytree(source.parent, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / source.name)
    for path in (root, *root.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def python_as_nobody(code: str, *args: str, imports: tuple[str, ...] = ("hostcheck",),
                     timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``python -c code args`` as ``nobody`` (as the current user when not root), with
    ``imports`` importable from a copy that user can read; cwd ``/``."""
    env = {**os.environ, "PYTHONPATH": str(readable_copy(*imports))}
    # The virtualenv's own interpreter may sit under a directory nobody cannot traverse.
    cmd = [getattr(sys, "_base_executable", sys.executable), "-s", "-c", code, *args]
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        cmd = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd="/")
