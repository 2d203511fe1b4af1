"""Shell completion for bash, as a user gets it: a real bash evaluates the script that the
installed `hostcheck` prints (`_HOSTCHECK_COMPLETE=source_bash hostcheck`, README's "Shell
completion"), and its completion function asks that same executable for the words."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostcheck.cli import COMMANDS, load_command
from tests.helpers import REPO

BASH = shutil.which("bash")
HOSTCHECK = Path(sys.executable).parent / "hostcheck"
"""The console script pip installed beside this Python (PYTHONPATH keeps it on this tree)."""

pytestmark = [pytest.mark.skipif(BASH is None, reason="bash is not installed"),
              pytest.mark.skipif(not HOSTCHECK.is_file(), reason=f"no installed hostcheck at {HOSTCHECK}")]


def complete(*words: str) -> list[str]:
    """What bash offers after `hostcheck WORDS` (the last word is the one being completed):
    COMP_WORDS and COMP_CWORD set as readline sets them, then the registered function."""
    argv = ["hostcheck", *words]
    script = (
        'eval "$(_HOSTCHECK_COMPLETE=source_bash hostcheck)" || exit 9\n'
        'spec=$(complete -p hostcheck) || exit 8\n'
        'func=$(printf "%s" "$spec" | sed -n "s/.*-F \\([^ ]*\\) hostcheck$/\\1/p")\n'
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in argv)})\n"
        f"COMP_CWORD={len(argv) - 1}\n"
        '"$func" hostcheck "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {"PATH": f"{HOSTCHECK.parent}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": os.environ.get("HOME", "/tmp"),
           "LANG": "C.UTF-8"}
    proc = subprocess.run([BASH, "--norc", "--noprofile", "-c", script], capture_output=True, text=True,
                          timeout=60, env=env, cwd=REPO, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line]


def options(command: str) -> list[str]:
    """Every long option of `hostcheck COMMAND`, from the command itself."""
    click_command = load_command(command)
    return [name for param in click_command.params for name in getattr(param, "opts", ()) if name.startswith("--")]


def test_the_script_registers_a_function_for_hostcheck() -> None:
    proc = subprocess.run([str(HOSTCHECK)], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), "_HOSTCHECK_COMPLETE": "source_bash"})
    assert proc.returncode == 0, proc.stderr
    assert "complete -o default -F _hostcheck_completion hostcheck" in proc.stdout


def test_every_command_is_offered_after_hostcheck() -> None:
    assert sorted(complete("")) == sorted(COMMANDS)


def test_a_prefix_narrows_the_commands() -> None:
    assert complete("ex") == [name for name in COMMANDS if name.startswith("ex")] == ["explain"]


def test_a_command_s_options_are_offered() -> None:
    wanted = sorted(name for name in options("audit") if name.startswith("--fo"))
    assert wanted, "audit has a --fo... option (--format)"
    assert sorted(complete("audit", "--fo")) == wanted
