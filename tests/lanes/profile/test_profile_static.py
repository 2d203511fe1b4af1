"""The profile's code, without a lab host: ansible-lint (production profile), playbook syntax,
each role's layout and argument specs, the docs, and the links between the audit's findings
and the roles that fix them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from hostcheck.checks import load_registry
from tests.lanes.profile import collection, play

pytestmark = [pytest.mark.ansible]

ROLES = ("host_baseline", "ssh_hardening", "firewall", "docker_host", "nvidia_host", "isolation",
         "provider_vast", "provider_salad")
REQUIRED = ("defaults/main.yml", "meta/argument_specs.yml", "meta/main.yml", "tasks/main.yml",
            "tasks/rollback.yml")
ROLE_DIR = play.REPO / "roles"


def load(path: Path) -> object:
    return yaml.safe_load(path.read_text())


def test_ansible_lint_production_profile_is_clean() -> None:
    proc = subprocess.run([str(play.VENV_BIN / "ansible-lint"), "--nocolor", "-f", "pep8"], cwd=play.REPO,
                          env=play.ansible_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    assert "Profile 'production' was required, and it passed" in proc.stderr + proc.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collection.build(tmp_path_factory.mktemp("collection"))


def test_collection_build_holds_the_profile_and_nothing_else(built: Path) -> None:
    """`ansible-galaxy collection build` takes the roles, playbooks, plugins, runtime metadata,
    the collection's README and changelog and docs/roles.md; not the CLI, tests or bench, and
    not rollback_manifest's links for runs from a clone (a collection's roles use plugins/)."""
    names = collection.members(built)
    # .ansible-lint: what ansible-lint needs to check the installed roles one by one (mock_modules)
    assert {n.split("/")[0] for n in names} == {"MANIFEST.json", "FILES.json", "COLLECTION.md", "CHANGELOG.md",
                                                ".ansible-lint", "docs", "meta", "playbooks", "plugins", "roles"}
    assert [n for n in names if n.startswith("docs/")] == ["docs/roles.md"]
    assert {n.split("/")[1] for n in names if n.startswith("roles/")} == {
        p.name for p in ROLE_DIR.iterdir() if p.is_dir()}
    assert {n for n in names if n.startswith("plugins/") and n.endswith(".py")} == {
        p.relative_to(play.REPO).as_posix() for p in (play.REPO / "plugins").rglob("*.py")}
    assert [n for n in names if n.startswith("roles/rollback_manifest/")
            and n.split("/")[2] in ("library", "action_plugins")] == []
    # a collection playbook's full name is a Python identifier: provider_enable, watch_report
    for name in ("site", "rollback", "provider_enable", "audit", "watch_report"):
        assert f"playbooks/{name}.yml" in names


def test_ansible_lint_production_profile_passes_on_the_installed_collection(built: Path, tmp_path: Path) -> None:
    """What a user installs, linted where it lands (no galaxy.yml there: the built MANIFEST.json)."""
    galaxy = play.VENV_BIN / "ansible-galaxy"
    install = subprocess.run([str(galaxy), "collection", "install", str(built), "-p", str(tmp_path)], cwd=tmp_path,
                             env=play.ansible_env(), capture_output=True, text=True, timeout=120)
    assert install.returncode == 0, install.stdout + install.stderr
    where = tmp_path / "ansible_collections" / collection.NAMESPACE / collection.NAME
    proc = subprocess.run([str(play.VENV_BIN / "ansible-lint"), "--nocolor", "-f", "pep8", "--profile", "production",
                           "--offline"], cwd=where, env={**play.ansible_env(), "ANSIBLE_COLLECTIONS_PATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    assert "Profile 'production' was required, and it passed" in proc.stderr + proc.stdout


@pytest.mark.parametrize("module", sorted(p.stem for p in (play.REPO / "plugins/modules").glob("*.py")))
def test_module_documentation_parses(module: str) -> None:
    """ansible-doc reads each module's DOCUMENTATION, EXAMPLES and RETURN (ansible-lint only warns)."""
    proc = subprocess.run([str(play.VENV_BIN / "ansible-doc"), "--json", "-t", "module", module], cwd=play.REPO,
                          env=play.ansible_env({"ANSIBLE_LIBRARY": str(play.REPO / "plugins/modules")}),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ERROR" not in proc.stderr, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)[module]
    assert doc["doc"]["options"] and doc["return"], sorted(doc)


@pytest.mark.parametrize("playbook", ["site.yml", "provider-enable.yml", "rollback.yml", "audit.yml", "watch-report.yml"])
def test_playbook_syntax(playbook: str) -> None:
    proc = subprocess.run([str(play.VENV_BIN / "ansible-playbook"), "--syntax-check", "-i",
                           str(play.REPO / "inventory/example/hosts.yml"), str(play.PLAYBOOKS / playbook)],
                          cwd=play.REPO, env=play.ansible_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("role", ROLES)
def test_role_layout(role: str) -> None:
    missing = [f for f in REQUIRED if not (ROLE_DIR / role / f).is_file()]
    assert missing == []
    meta = load(ROLE_DIR / role / "meta/main.yml")
    assert {"role": "rollback_manifest"} in meta["dependencies"], "the manifest module comes from this dependency"


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_match_defaults(role: str) -> None:
    defaults = load(ROLE_DIR / role / "defaults/main.yml")
    spec = load(ROLE_DIR / role / "meta/argument_specs.yml")["argument_specs"]
    options = spec["main"]["options"]
    assert set(options) == set(defaults), {"undocumented": set(defaults) - set(options),
                                           "not a default": set(options) - set(defaults)}
    for name, option in options.items():
        assert name.startswith(role + "_"), f"{name} is not prefixed with {role}_"
        assert option.get("description"), f"{name} has no description"
        assert option["default"] == defaults[name], name
    assert f"{role}_enabled" in defaults, "every role has a master switch"
    assert "rollback" in spec


def test_audit_findings_name_existing_role_variables() -> None:
    """Every finding's fix_role ("role: variable") points at a real role and one of its variables."""
    wrong = []
    for check_id, meta in sorted(load_registry().items()):
        if not meta.fix_role:
            continue
        role, _, variable = (part.strip() for part in meta.fix_role.partition(":"))
        defaults_file = ROLE_DIR / role / "defaults/main.yml"
        if not defaults_file.is_file() or variable not in load(defaults_file):
            wrong.append(f"{check_id}: {meta.fix_role}")
    assert wrong == []


def test_acknowledgement_is_one_exact_sentence_everywhere() -> None:
    sentences = {load(ROLE_DIR / role / "vars/main.yml")[f"{role}_acknowledgement_required"]
                 for role in ("provider_vast", "provider_salad")}
    assert sentences == {play.ACKNOWLEDGEMENT}
    assert play.ACKNOWLEDGEMENT in (play.REPO / "docs/roles.md").read_text()
    assert play.ACKNOWLEDGEMENT in (play.PLAYBOOKS / "provider-enable.yml").read_text()


def test_site_pins_every_agent_off() -> None:
    (site,) = load(play.PLAYBOOKS / "site.yml")
    roles = {r["role"]: r.get("vars", {}) for r in site["roles"]}
    assert roles["provider_vast"] == {"provider_vast_enable_agent": False}
    assert roles["provider_salad"] == {"provider_salad_enable_agent": False}


def test_only_builtin_modules() -> None:
    """Galaxy is unreachable here: no collection beyond ansible.builtin (and the profile's own
    hostcheck_manifest module)."""
    used = set()
    for path in list(ROLE_DIR.rglob("tasks/*.yml")) + list(ROLE_DIR.rglob("handlers/*.yml")) + list(play.PLAYBOOKS.glob("*.yml")):
        used |= set(re.findall(r"^\s+-?\s*([a-z_]+\.[a-z_]+\.[a-z_]+):", path.read_text(), re.M))
    assert {u for u in used if not u.startswith("ansible.builtin.")} == set()
