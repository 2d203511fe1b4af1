"""hostcheck_read, hostcheck_write and hostcheck_manifest take their arguments as JSON pasted
into their source by Ansible (no AnsiballZ). Run by real Ansible on this machine, against files
in a temporary directory only:

- hostcheck_read answers what ansible.builtin.command and ansible.builtin.slurp answer for the
  same argv or file, kills a probe that overruns with everything it started, and runs in check
  mode (it only reads);
- arguments that could break out of the pasted JSON (quotes, triple quotes, backslashes,
  newlines, Unicode line separators) arrive byte for byte;
- unknown, missing and mistyped arguments are refused with the option's name, as
  AnsibleModule refuses them.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.lanes.profile import play

pytestmark = [pytest.mark.ansible, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="hostcheck_manifest refuses to run without root")]

LIBRARY = play.REPO / "roles/rollback_manifest/library"
# What a shell, Python's triple-quoted strings and JSON each treat specially.
HOSTILE = 'a"""b\'\'\'c \\ \\n \\" $(id) `id` \n second line\u2028\u00e9\t\x00end'


def call(module: str, args: dict[str, Any], check: bool = False) -> dict[str, Any]:
    """One ad-hoc call on this machine: the module's result as `ansible --tree` saves it, and
    whether the call failed (ansible's exit status: the saved result leaves that out)."""
    with tempfile.TemporaryDirectory() as tree:
        argv = [str(play.VENV_BIN / "ansible"), "localhost", "-c", "local", "-M", str(LIBRARY), "-m", module,
                "-a", json.dumps(args), "-t", tree]
        if check:
            argv.append("--check")
        env = play.ansible_env({"ANSIBLE_PYTHON_INTERPRETER": str(play.VENV_BIN / "python"),
                                "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False", "ANSIBLE_LOCALHOST_WARNING": "False"})
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        result: dict[str, Any] = json.loads((Path(tree) / "localhost").read_text())
    assert proc.returncode in (0, 2), proc.stdout + proc.stderr
    result["failed"] = proc.returncode == 2
    return result


@pytest.mark.parametrize("argv", [
    ["sh", "-c", "printf 'one\\ntwo\\n\\n'; printf 'warn\\n' >&2"],
    ["sh", "-c", "printf 'x'; exit 3"],
    ["cat", "/etc/hostname"],
])
def test_read_answers_what_command_answers(argv: list[str]) -> None:
    ours, builtin = call("hostcheck_read", {"argv": argv}), call("ansible.builtin.command", {"argv": argv})
    for key in ("rc", "stdout", "stderr", "stdout_lines"):
        assert ours[key] == builtin[key], key
    assert ours["failed"] == builtin["failed"]
    assert ours["changed"] is False


def test_read_of_a_file_answers_what_slurp_answers(tmp_path: Path) -> None:
    target = tmp_path / "config"
    target.write_bytes(b"\x00binary\xff and text\n\n")
    ours, builtin = call("hostcheck_read", {"src": str(target)}), call("ansible.builtin.slurp", {"src": str(target)})
    assert ours["content"] == builtin["content"]
    assert base64.b64decode(ours["content"]) == target.read_bytes()
    missing = call("hostcheck_read", {"src": str(tmp_path / "absent")})
    assert missing["failed"] is True and "No such file" in missing["msg"]


def test_read_runs_in_check_mode() -> None:
    assert call("hostcheck_read", {"argv": ["echo", "read"]}, check=True)["stdout"] == "read"


def test_read_kills_an_overrunning_probe_and_what_it_started(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    started = time.monotonic()
    result = call("hostcheck_read", {"argv": ["sh", "-c", f"sleep 300 & echo $! > {marker}; sleep 300"],
                                     "timeout": 2})
    assert time.monotonic() - started < 60
    assert result["failed"] is True and "did not finish within 2 s" in result["msg"]
    grandchild = int(marker.read_text())
    for _ in range(50):
        if not Path(f"/proc/{grandchild}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{grandchild}").exists(), "the probe's background child survived the timeout"


def test_hostile_arguments_arrive_byte_for_byte(tmp_path: Path) -> None:
    echoed = call("hostcheck_read", {"argv": ["printf", "%s", HOSTILE.replace("\x00", "")]})
    assert echoed["stdout"] == HOSTILE.replace("\x00", "").rstrip("\r\n")
    dest = tmp_path / "written"
    wrote = call("hostcheck_write", {"dest": str(dest), "content": HOSTILE, "mode": "0640",
                                     "owner": "root", "group": "root"})
    assert wrote["changed"] is True
    assert dest.read_bytes() == HOSTILE.encode()
    assert call("hostcheck_write", {"dest": str(dest), "content": HOSTILE, "mode": "0640",
                                    "owner": "root", "group": "root"})["changed"] is False


def test_write_shows_the_diff_copy_shows(tmp_path: Path) -> None:
    """Under --check --diff, the same file through hostcheck_write and ansible.builtin.copy."""
    dest, out = tmp_path / "app.conf", tmp_path / "results.json"
    dest.write_text("answer = 41\n")
    dest.chmod(0o600)
    args = {"dest": str(dest), "content": "answer = 42\n", "mode": "0640", "owner": "root", "group": "root"}
    book = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Ours", "hostcheck_write": args, "register": "ours"},
        {"name": "The builtin", "ansible.builtin.copy": args, "register": "builtin"},
        {"name": "Save both", "delegate_to": "localhost", "check_mode": False, "diff": False,
         "ansible.builtin.copy": {"content": "{{ {'ours': ours, 'builtin': builtin} | to_json }}", "dest": str(out)}},
    ]}]
    (tmp_path / "book.yml").write_text(json.dumps(book))
    proc = subprocess.run(
        [str(play.VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "-M", str(LIBRARY),
         "--check", "--diff", str(tmp_path / "book.yml")], capture_output=True, text=True, timeout=120,
        env=play.ansible_env({"ANSIBLE_PYTHON_INTERPRETER": str(play.VENV_BIN / "python"),
                              "ANSIBLE_LOCALHOST_WARNING": "False"}))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    results = json.loads(out.read_text())
    ours, builtin = results["ours"], results["builtin"]
    assert ours["changed"] and builtin["changed"]
    assert (ours["diff"][0]["before"], ours["diff"][0]["after"]) == (builtin["diff"][0]["before"],
                                                                   builtin["diff"][0]["after"])
    assert (ours["diff"][1]["before"]["mode"], ours["diff"][1]["after"]["mode"]) == ("0600", "0640")
    assert dest.read_text() == "answer = 41\n", "check mode wrote nothing"


def attrs(path: Path) -> tuple[str, int, int]:
    st = path.lstat()
    return oct(st.st_mode & 0o7777), st.st_uid, st.st_gid


def test_write_makes_a_directory_as_the_file_module_does(tmp_path: Path) -> None:
    """state=directory next to ansible.builtin.file state=directory: the same tree, parents
    included (the file module gives each directory it creates the attributes asked for), the
    same answer for a directory already as asked, attributes set on an existing one."""
    ask = {"state": "directory", "mode": "0750", "owner": "nobody", "group": "daemon"}
    ours, builtin = tmp_path / "ours", tmp_path / "builtin"
    made = call("hostcheck_write", {"dest": str(ours / "a/b"), **ask})
    made_builtin = call("ansible.builtin.file", {"path": str(builtin / "a/b"), **ask})
    assert made["changed"] and made_builtin["changed"] and not made["failed"]
    for rel in ("", "a", "a/b"):
        assert attrs(ours / rel) == attrs(builtin / rel), rel
    assert attrs(ours / "a/b")[0] == "0o750"
    again = call("hostcheck_write", {"dest": str(ours / "a/b"), **ask})
    assert again["changed"] is False and again["failed"] is False
    (ours / "a/b").chmod(0o777)
    fixed = call("hostcheck_write", {"dest": str(ours / "a/b"), **ask})
    assert fixed["changed"] and attrs(ours / "a/b")[0] == "0o750"


def test_write_of_a_directory_in_check_mode_changes_nothing_and_refuses_a_link(tmp_path: Path) -> None:
    ask = {"state": "directory", "mode": "0700", "owner": "root", "group": "root"}
    planned = call("hostcheck_write", {"dest": str(tmp_path / "new"), **ask}, check=True)
    assert planned["changed"] and not (tmp_path / "new").exists()
    (tmp_path / "elsewhere").mkdir(mode=0o755)
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    refused = call("hostcheck_write", {"dest": str(tmp_path / "link"), **ask})
    assert refused["failed"] and "not a directory" in refused["msg"]
    assert attrs(tmp_path / "elsewhere")[0] == "0o755", "the link's target is left alone"


@pytest.mark.parametrize(("module", "args", "says"), [
    ("hostcheck_read", {"argv": ["true"], "shell": True}, "unsupported parameters: shell"),
    ("hostcheck_read", {"timeout": 5}, "exactly one of argv and src"),
    ("hostcheck_read", {"argv": ["true"], "src": "/etc/hostname"}, "exactly one of argv and src"),
    ("hostcheck_read", {"argv": "true"}, "argv must be a non-empty list"),
    ("hostcheck_read", {"argv": ["true"], "timeout": 0}, "timeout must be a positive"),
    ("hostcheck_write", {"dest": "/nonexistent/x", "content": "x", "mode": "0600", "owner": "root"},
     "missing required arguments: group"),
    ("hostcheck_write", {"dest": "/nonexistent/x", "content": "x", "mode": "0600", "owner": "root", "group": "root",
                         "backup": True}, "unsupported parameters: backup"),
    ("hostcheck_write", {"dest": "/nonexistent/x", "state": "directory", "content": "x", "mode": "0700",
                         "owner": "root", "group": "root"}, "state=directory takes no content"),
    ("hostcheck_write", {"dest": "/nonexistent/x", "state": "link", "mode": "0700", "owner": "root", "group": "root"},
     "state must be one of file, directory"),
    ("hostcheck_manifest", {"path": "/nonexistent/m.json", "action": "record"}, "missing: role"),
    ("hostcheck_manifest", {"path": "/nonexistent/m.json", "role": "r", "action": "erase"}, "action must be one of"),
    ("hostcheck_manifest", {"path": "/nonexistent/m.json", "role": "r", "files": {"a": 1}}, "files must be a list"),
    ("hostcheck_manifest", {"path": "/nonexistent/m.json", "role": "r", "remove_empty": "maybe"},
     "remove_empty must be a boolean"),
    ("hostcheck_manifest", {"path": "/nonexistent/m.json", "role": "r", "colour": "red"},
     "unsupported parameters: colour"),
    ("hostcheck_manifest", {"path": "/nonexistent/m.json", "role": "r",
                            "sysctl_defaults": [{"key": "net.ipv4.conf.{}.rp_filter", "value": "1"}]},
     "missing required argument in sysctl_defaults: interfaces"),
])
def test_bad_arguments_are_refused_by_name(module: str, args: dict[str, Any], says: str) -> None:
    result = call(module, args)
    assert result["failed"] is True
    assert says in result["msg"]
