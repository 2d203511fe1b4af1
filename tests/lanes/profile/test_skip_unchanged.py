"""hostcheck_copy and hostcheck_directory, run by real Ansible on this machine against a
temporary directory: they answer "ok" without touching the host only when the role's manifest
record found the path exactly as wanted, and are ansible.builtin.copy / file otherwise (a file
the record found absent or different is written by hostcheck_write in one call, validated
first). A file changed, re-moded or removed behind the profile's back is put right by the next run.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.lanes.profile import play

pytestmark = [pytest.mark.ansible, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="the manifest module records owners and needs root")]

ROLE = play.REPO / "roles/rollback_manifest"
SKIPPED = "already as wanted when the role recorded it"


def run(tmp: Path, check: bool = False, diff: bool = False, validate: str | None = None) -> dict[str, dict[str, Any]]:
    """The play below; each task's result by task name."""
    conf, folder = tmp / "etc" / "app.conf", tmp / "etc" / "app.d"
    checked = {"validate": validate} if validate else {}
    tasks = [
        {"name": "record", "hostcheck_manifest": {"role": "t", "path": str(tmp / "manifest.json"),
                                                  "files": [str(conf), str(folder)]}},
        {"name": "folder", "register": "folder", "hostcheck_directory": {
            "path": str(folder), "state": "directory", "owner": "root", "group": "root", "mode": "0750"}},
        {"name": "file", "register": "file", "hostcheck_copy": {
            "dest": str(conf), "content": "{{ lookup('ansible.builtin.template', 'app.j2') }}",
            "owner": "root", "group": "root", "mode": "0640", **checked}, "ignore_errors": bool(validate)},
        {"name": "results", "check_mode": False, "ansible.builtin.copy": {
            "dest": str(tmp / "results.json"), "content": "{{ {'folder': folder, 'file': file} | to_json }}"}},
    ]
    book = tmp / "play.yml"
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    (tmp / "templates").mkdir(exist_ok=True)
    (tmp / "templates" / "app.j2").write_text("answer = {{ 6 * 7 }}\n")
    argv = [str(play.VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(book)]
    if check:
        argv.append("--check")
    if diff:
        argv.append("--diff")
    env = play.ansible_env({"ANSIBLE_PYTHON_INTERPRETER": str(play.VENV_BIN / "python"),
                            "ANSIBLE_LOCALHOST_WARNING": "False",
                            "ANSIBLE_LIBRARY": str(ROLE / "library"),
                            "ANSIBLE_ACTION_PLUGINS": str(ROLE / "action_plugins")})
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads((tmp / "results.json").read_text())


def test_only_what_was_recorded_as_wanted_is_skipped(tmp_path: Path) -> None:
    conf, folder = tmp_path / "etc" / "app.conf", tmp_path / "etc" / "app.d"
    (tmp_path / "etc").mkdir()

    first = run(tmp_path)
    assert first["file"]["changed"] and first["folder"]["changed"]
    assert written_in_one_call(first["file"]), first["file"]
    assert conf.read_text() == "answer = 42\n" and oct(conf.stat().st_mode & 0o777) == "0o640"

    again = run(tmp_path)
    assert not again["file"]["changed"] and again["file"].get("msg") == SKIPPED
    assert not again["folder"]["changed"] and again["folder"].get("msg") == SKIPPED

    conf.write_text("answer = 41\n")
    folder.chmod(0o755)
    dry = run(tmp_path, check=True)
    assert dry["file"]["changed"] and dry["folder"]["changed"], "drift is reported in check mode"
    assert conf.read_text() == "answer = 41\n" and oct(folder.stat().st_mode & 0o777) == "0o755", "and not fixed"

    fixed = run(tmp_path)
    assert fixed["file"]["changed"] and fixed["folder"]["changed"]
    assert conf.read_text() == "answer = 42\n" and oct(folder.stat().st_mode & 0o777) == "0o750"

    conf.chmod(0o644)
    assert run(tmp_path)["file"]["changed"] and oct(conf.stat().st_mode & 0o777) == "0o640"
    conf.unlink()
    assert run(tmp_path)["file"]["changed"] and conf.read_text() == "answer = 42\n"


def written_in_one_call(result: dict[str, Any]) -> bool:
    """hostcheck_write took the content in its arguments; ansible.builtin.copy transfers a
    file first and returns where it put it (src) and its md5sum."""
    return bool(result.get("checksum")) and not {"src", "md5sum"} & set(result)


def test_a_file_not_as_wanted_is_written_in_one_call_validated_and_never_through_a_link(tmp_path: Path) -> None:
    conf = tmp_path / "etc" / "app.conf"
    (tmp_path / "etc").mkdir()
    conf.write_text("answer = 41\n")
    conf.chmod(0o600)

    refused = run(tmp_path, validate="grep -q 'answer = 41' %s")
    assert refused["file"]["failed"] and "failed to validate" in refused["file"]["msg"]
    assert conf.read_text() == "answer = 41\n", "a content that fails validation never replaces the file"
    assert sorted(p.name for p in conf.parent.iterdir()) == ["app.conf", "app.d"], "no temporary file left"

    written = run(tmp_path, validate="grep -q 'answer = 42' %s")
    assert written["file"]["changed"] and written_in_one_call(written["file"])
    assert conf.read_text() == "answer = 42\n" and oct(conf.stat().st_mode & 0o777) == "0o640"

    conf.write_text("answer = 40\n")
    shown = run(tmp_path, check=True, diff=True)
    assert shown["file"]["changed"] and written_in_one_call(shown["file"]), "--diff keeps the one call"
    content = shown["file"]["diff"][0]
    assert "answer = 40" in content["before"] and "answer = 42" in content["after"], "--diff: before and after"
    assert conf.read_text() == "answer = 40\n"

    target = tmp_path / "elsewhere.conf"
    target.write_text("someone else's\n")
    conf.unlink()
    conf.symlink_to(target)
    through_link = run(tmp_path)
    assert through_link["file"]["changed"] and not written_in_one_call(through_link["file"]), \
        "a link is recorded as 'other': ansible.builtin.copy decides, as before"
