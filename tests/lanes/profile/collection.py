"""The host profile as an Ansible user takes it: the collection built from this repository,
installed from its tarball into a fresh collections path, and called by full names from an
Ansible directory of the user's own (its ansible.cfg, inventory, requirements.yml, playbook).

Shared by the lifecycle lane (tests/lanes/profile/test_profile_lifecycle.py) and the lint of
the built collection (tests/lanes/profile/test_profile_static.py)."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import yaml

from tests.lanes.profile import play

NAMESPACE, NAME = "hostcheck", "host_profile"
FQCN = f"{NAMESPACE}.{NAME}"

# What an operator writes: site.yml's roles in its order, by their full names, after the
# lockout guard. (site.yml's provider-port markers matter only once provider-enable.yml has
# run; an operator who enables agents keeps site.yml's pre_tasks or runs the collection's
# site playbook.)
USER_PLAYBOOK = [{
    "name": "Profile my GPU hosts",
    "hosts": "gpu_hosts",
    "become": True,
    "gather_facts": True,
    "gather_subset": ["min", "network", "virtual"],
    "pre_tasks": [{"name": "Check that the admin keeps a way in",
                   "ansible.builtin.include_role": {"name": f"{FQCN}.ssh_hardening", "tasks_from": "guard.yml"}}],
    "roles": [{"role": f"{FQCN}.{role}"} for role in (
        "host_baseline", "ssh_hardening", "firewall", "docker_host", "nvidia_host", "isolation", "agent_oversight")]
    + [{"role": f"{FQCN}.provider_vast", "vars": {"provider_vast_enable_agent": False}},
       {"role": f"{FQCN}.provider_salad", "vars": {"provider_salad_enable_agent": False}},
       {"role": f"{FQCN}.hostcheck_watch"}],
}]

ANSIBLE_CFG = """[defaults]
inventory = ./inventory.ini
# only what requirements.yml installed: no role or collection from anywhere else
collections_path = ./collections
collections_scan_sys_path = false
roles_path = ./roles
interpreter_python = auto_silent
retry_files_enabled = false
callbacks_enabled = hostcheck.host_profile.preload

[ssh_connection]
pipelining = true
"""


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{' '.join(argv)} -> rc={proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc


def build(out: Path) -> Path:
    """`ansible-galaxy collection build` in the repository root, as a release would; the tarball."""
    out.mkdir(parents=True, exist_ok=True)
    _run([str(play.VENV_BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out)],
         play.REPO, play.ansible_env(), 120)
    version = yaml.safe_load((play.REPO / "galaxy.yml").read_text())["version"]
    tarball = out / f"{NAMESPACE}-{NAME}-{version}.tar.gz"
    assert tarball.is_file(), sorted(out.iterdir())
    return tarball


def members(tarball: Path) -> list[str]:
    with tarfile.open(tarball) as tar:
        return sorted(m.name for m in tar.getmembers())


def user_project(folder: Path, tarball: Path, inventory_line: str, group_vars: dict[str, Any]) -> Path:
    """An operator's Ansible directory outside the clone, the collection installed into its own
    collections path from requirements.yml. Returns the directory."""
    folder.mkdir(parents=True)
    local = folder / tarball.name  # copied in: nothing below points back into the clone
    local.write_bytes(tarball.read_bytes())
    (folder / "ansible.cfg").write_text(ANSIBLE_CFG)
    (folder / "requirements.yml").write_text(json.dumps(
        {"collections": [{"name": f"./{tarball.name}", "type": "file"}]}, indent=1))
    (folder / "inventory.ini").write_text(f"[gpu_hosts]\n{inventory_line}\n")
    (folder / "group_vars").mkdir()
    (folder / "group_vars" / "gpu_hosts.yml").write_text(json.dumps(group_vars, indent=1))
    (folder / "profile.yml").write_text(json.dumps(USER_PLAYBOOK, indent=1))
    _run([str(play.VENV_BIN / "ansible-galaxy"), "collection", "install", "-r", "requirements.yml", "-p", "collections"],
         folder, play.project_env(folder), 120)
    return folder


def installed(project: Path) -> Path:
    return project / "collections" / "ansible_collections" / NAMESPACE / NAME
