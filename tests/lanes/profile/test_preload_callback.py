"""The preload callback: the controller indexes the filter and test plugins before it forks a
process per task, and the clone's ansible.cfg loads it without a warning. (What it saves is
measured by bench/profile.py, not asserted here.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.lanes.profile import play

pytestmark = [pytest.mark.ansible]

PLUGIN = play.REPO / "plugins/callback/preload.py"


def test_playbook_start_indexes_filters_and_tests_before_any_task() -> None:
    # In a process of its own: the plugin loaders are per-process singletons.
    script = """
import importlib.util, json
from ansible.plugins.loader import init_plugin_loader, filter_loader, test_loader
init_plugin_loader()
before = [len(filter_loader._cached_non_collection_wrappers), len(test_loader._cached_non_collection_wrappers)]
spec = importlib.util.spec_from_file_location("preload", PLUGIN)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.CallbackModule().v2_playbook_on_start(None)
print(json.dumps({"before": before, "quote": "quote" in filter_loader._cached_non_collection_wrappers,
                  "match": "match" in test_loader._cached_non_collection_wrappers}))
""".replace("PLUGIN", repr(str(PLUGIN)))
    proc = subprocess.run([str(play.VENV_BIN / "python"), "-c", script], capture_output=True, text=True,
                          env=play.ansible_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"before": [0, 0], "quote": True, "match": True}


def test_the_clone_loads_it_from_plugins_without_a_warning(tmp_path: Path) -> None:
    book = tmp_path / "play.yml"
    book.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.debug:\n        msg: \"{{ 'x' | quote }}\"\n")
    proc = subprocess.run([str(play.VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "-vvvv", str(book)],
                          capture_output=True, text=True, cwd=play.REPO,
                          env=play.ansible_env({"ANSIBLE_LOCALHOST_WARNING": "False"}), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = proc.stdout + proc.stderr
    assert f"Loading callback plugin hostcheck.host_profile.preload of type aggregate, v2.0 from {PLUGIN}" in said, said
    assert not [line for line in said.splitlines() if "WARNING" in line and "callback" in line.lower()], said
