"""Provider agents: the sudoers reader against hostile input, the AGT-* checks as a table, the
owner-risk words a report gives when an agent holds root, and `hostcheck explain AGENT`.

The facts below are shaped like the agents collector's output for the installers modelled in
policies/agents/agents.yaml (Vast's account vastai_kaalia with `ALL=(ALL) NOPASSWD:ALL`,
TensorDock's tensordock with the same rule, Salad's root services, io.net's containers).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from hostcheck import sudoers
from hostcheck.agents import Catalog, load_catalog
from hostcheck.checks import load_registry
from hostcheck.collectors.agents import kernel_params, parse_unit_show, summarise_sudo_journal
from hostcheck.collectors.docker_daemon import container_settings
from hostcheck.facts import Unknown, load_snapshot
from hostcheck.judge import run_check
from hostcheck.policy import resolve_policies
from hostcheck.report import build_report
from tests.helpers import SNAPSHOTS, hostcheck

REGISTRY = load_registry()
VAST_RULE = "vastai_kaalia ALL=(ALL) NOPASSWD:ALL"
DENIED = Unknown("permission denied reading /etc/sudoers (needs root): sudo rules are readable only by root")


# ------------------------------------------------------------------ the sudoers reader


def load(files: dict[str, str], dirs: dict[str, list[str]] | None = None) -> sudoers.Loaded | Unknown:
    dirs = dirs or {}
    return sudoers.load(lambda p: files.get(p, Unknown(f"{p} does not exist")),
                        lambda d: dirs.get(d, Unknown(f"cannot list {d}")))


def view(files: dict[str, str], account: str = "vastai_kaalia", groups: frozenset[str] = frozenset({"docker"}),
         dirs: dict[str, list[str]] | None = None) -> dict[str, Any]:
    loaded = load(files, dirs)
    assert not isinstance(loaded, Unknown)
    return sudoers.account_view(loaded, account, set(groups))


def test_vasts_stock_rule_is_unrestricted() -> None:
    text = f"root ALL=(ALL:ALL) ALL\n%sudo ALL=(ALL:ALL) ALL\n# To allow Vast.ai host daemon to administer configuration\n{VAST_RULE}\n"
    got = view({"/etc/sudoers": text})
    assert got["scope"] == "unrestricted"
    assert [(r["file"], r["line"], r["rule"], r["nopasswd"]) for r in got["rules"]] == [
        ("/etc/sudoers", 4, "vastai_kaalia ALL=(ALL) NOPASSWD: ALL", True)]
    assert (got["syslog"], got["io_logging"]) == (True, False)  # sudo's defaults


def test_the_rule_in_a_cloud_init_dropin_is_found_through_includedir() -> None:
    files = {"/etc/sudoers": "@includedir /etc/sudoers.d\n", "/etc/sudoers.d/90-cloud-init-users": VAST_RULE + "\n",
             "/etc/sudoers.d/README": "# nothing\n"}
    got = view(files, dirs={"/etc/sudoers.d": ["README", "90-cloud-init-users", "old.bak", "editor~"]})
    assert got["scope"] == "unrestricted"
    # sudo skips names with a '.' or ending in '~'; the others are read in lexical order
    assert got["files_read"] == ["/etc/sudoers", "/etc/sudoers.d/90-cloud-init-users", "/etc/sudoers.d/README"]


@pytest.mark.parametrize(("rule", "scope", "giving"), [
    ("vastai_kaalia ALL=(root) NOPASSWD: /usr/bin/nvidia-smi -pm 1", "restricted", []),
    ("vastai_kaalia ALL=(root) NOPASSWD: /usr/bin/systemd-run --scope --unit=vastai_script_updater sh -c *",
     "restricted", ["/usr/bin/systemd-run --scope --unit=vastai_script_updater sh -c *"]),
    ("vastai_kaalia ALL=(nobody) NOPASSWD: ALL", "restricted", []),
    ("vastai_kaalia ALL=(ALL:ALL) NOPASSWD: ALL", "unrestricted", []),
    ("Cmnd_Alias EVERYTHING = ALL\nvastai_kaalia ALL = NOPASSWD: EVERYTHING", "unrestricted", []),
    ("User_Alias AGENTS = vastai_kaalia, tensordock\nAGENTS ALL=(ALL) NOPASSWD:ALL", "unrestricted", []),
    ("%docker ALL=(ALL) NOPASSWD:ALL", "unrestricted", []),
    ("ALL,!vastai_kaalia ALL=(ALL) NOPASSWD:ALL", "none", []),
    ("someoneelse ALL=(ALL) NOPASSWD:ALL", "none", []),
])
def test_scope_of_a_rule(rule: str, scope: str, giving: list[str]) -> None:
    got = view({"/etc/sudoers": rule + "\n"})
    assert (got["scope"], got["root_giving"]) == (scope, giving)


@pytest.mark.parametrize(("defaults", "io_logging", "syslog"), [
    ("Defaults:vastai_kaalia log_output, log_input, iolog_dir=/var/log/sudo-io/%{user}", True, True),
    ("Defaults log_output", True, True),
    ("Defaults:tensordock log_output", False, True),
    ("Defaults:vastai_kaalia !syslog", False, False),
    ("Defaults:vastai_kaalia log_output\nDefaults:vastai_kaalia !log_output", False, True),
    ("Defaults:%docker log_input", True, True),
])
def test_defaults_that_log_the_account(defaults: str, io_logging: bool, syslog: bool) -> None:
    got = view({"/etc/sudoers": f"{defaults}\n{VAST_RULE}\n"})
    assert (got["io_logging"], got["syslog"]) == (io_logging, syslog)


def test_unreadable_sudoers_is_unknown_with_the_reason() -> None:
    got = sudoers.load(lambda p: Unknown(f"permission denied reading {p} (needs root)"), lambda d: [])
    assert isinstance(got, Unknown) and "permission denied reading /etc/sudoers" in got.reason


def test_an_unreadable_include_is_named_not_guessed() -> None:
    got = view({"/etc/sudoers": f"@include /etc/sudoers.d/secret\n{VAST_RULE}\n"})
    assert got["unreadable"] == ["/etc/sudoers.d/secret"] and got["scope"] == "unrestricted"


def test_include_loops_and_relative_includes_are_cut() -> None:
    files = {"/etc/sudoers": "@include /etc/a\n@include relative\n", "/etc/a": "@include /etc/b\n",
             "/etc/b": f"@include /etc/a\n#include /etc/sudoers\n{VAST_RULE}\n"}
    got = view(files)
    assert got["files_read"] == ["/etc/sudoers", "/etc/a", "/etc/b"] and got["scope"] == "unrestricted"


def test_a_deep_include_chain_stops_at_the_bound() -> None:
    depth = sudoers.MAX_INCLUDE_DEPTH + 5
    files = {"/etc/sudoers": "@include /etc/f1\n"}
    files.update({f"/etc/f{i}": f"@include /etc/f{i + 1}\n" for i in range(1, depth)})
    files[f"/etc/f{depth}"] = VAST_RULE + "\n"
    got = view(files)
    # the root file plus MAX_INCLUDE_DEPTH levels below it
    assert len(got["files_read"]) == sudoers.MAX_INCLUDE_DEPTH + 1 and got["scope"] == "none"


def test_an_includedir_with_thousands_of_files_is_bounded() -> None:
    names = [f"f{i:05d}" for i in range(5000)]
    files = {"/etc/sudoers": "@includedir /etc/sudoers.d\n", **{f"/etc/sudoers.d/{n}": "# x\n" for n in names}}
    got = view(files, dirs={"/etc/sudoers.d": names})
    assert len(got["files_read"]) == sudoers.MAX_FILES


def test_hostile_text_neither_hangs_nor_crashes() -> None:
    bomb = "\\\n" * 200_000 + VAST_RULE  # a continuation chain far past the line bound
    nul = "vastai_kaalia\0 ALL=(ALL) NOPASSWD:ALL\n"
    junk = "".join(chr(c) for c in range(1, 0x250)) + "\n=(=)=:,,\\,\n(((\nvastai_kaalia\nvastai_kaalia ALL=(\n"
    huge = ("x" * 1000 + "\n") * 1000 + VAST_RULE + "\n"  # the rule lies past MAX_FILE_CHARS
    alias_cycle = "Cmnd_Alias A = B\nCmnd_Alias B = A\nvastai_kaalia ALL = NOPASSWD: A\n"
    for text in (bomb, nul, junk, huge, alias_cycle):
        got = view({"/etc/sudoers": text})
        assert got["scope"] in ("none", "restricted", "unrestricted")
        assert all(len(r["rule"]) <= 400 for r in got["rules"])
    assert view({"/etc/sudoers": huge})["scope"] == "none"
    assert view({"/etc/sudoers": nul})["scope"] == "unrestricted"  # NUL bytes are dropped, as sudo refuses them
    assert view({"/etc/sudoers": junk})["unparsed_lines"] >= 3


def test_a_uid_is_not_a_comment_but_a_hash_is() -> None:
    got = view({"/etc/sudoers": "#1000 ALL=(ALL) NOPASSWD:ALL # trailing comment\n"}, account="#1000")
    assert [r["rule"] for r in got["rules"]] == ["#1000 ALL=(ALL) NOPASSWD: ALL"]


def test_the_allowlist_template_still_gives_root() -> None:
    """The role's Vast allowlist (rendered with its default account) is restricted, and the
    reader says which of its commands still give root (the reason it is only a tripwire)."""
    from pathlib import Path

    template = (Path(__file__).parents[1] / "roles" / "agent_oversight" / "templates" / "vast-allowlist.sudoers.j2").read_text()
    got = view({"/etc/sudoers": template.replace("{{ agent_oversight_vast_account }}", "vastai_kaalia")})
    assert got["scope"] == "restricted"
    giving = set(got["root_giving"])
    assert {"/usr/bin/systemd-run --scope --unit=vastai_script_updater *", "/usr/bin/virsh *",
            "/usr/bin/cp -f * /usr/local/bin/vastai-run-update"} <= giving
    assert "/usr/bin/ss *" not in giving


# ------------------------------------------------------------------ collector helpers


def test_sudo_journal_summary_counts_only_agent_accounts_and_survives_junk() -> None:
    def line(message: Any) -> str:
        return json.dumps({"MESSAGE": message, "SYSLOG_IDENTIFIER": "sudo"})

    lines = [
        line("vastai_kaalia : PWD=/var/lib/vastai_kaalia ; USER=root ; COMMAND=/usr/bin/id -u"),
        line("vastai_kaalia : PWD=/ ; USER=root ; COMMAND=/usr/bin/id -u"),
        line("vastai_kaalia : a password is required ; PWD=/ ; USER=root ; COMMAND=/usr/bin/cat /etc/shadow"),
        line("admin : PWD=/home/admin ; USER=root ; COMMAND=/bin/sh -c true"),
        line("vastai_kaalia : PWD=/ ; USER=root ; COMMAND=/x " + "A" * 5000),
        line(["not", "a", "string"]), "{not json", json.dumps([1, 2]), "",
        line("pam_unix(sudo:session): session opened for user root(uid=0) by (uid=0)"),
    ]
    got = summarise_sudo_journal(lines, {"vastai_kaalia"})
    assert got["entries"] == 4  # the four vastai_kaalia command lines
    commands = {(c["command"], c["outcome"]): c["count"] for c in got["commands"]}
    assert commands[("/usr/bin/id -u", "ran")] == 2
    assert commands[("/usr/bin/cat /etc/shadow", "refused")] == 1
    assert all(len(c["command"]) <= 200 and c["user"] == "vastai_kaalia" for c in got["commands"])


def test_unit_show_parsing_and_kernel_params() -> None:
    text = ("Id=vastai.service\nLoadState=loaded\nUnitFileState=enabled\nActiveState=active\n\n"
            "Id=crisper.service\nLoadState=not-found\nUnitFileState=\nActiveState=inactive\n")
    assert parse_unit_show(text)["vastai.service"]["ActiveState"] == "active"
    assert parse_unit_show(text)["crisper.service"]["LoadState"] == "not-found"
    got = kernel_params("BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on nvidia_drm.modeset=0 "
                        "vfio_iommu_type1.allow_unsafe_interrupts=1 quiet")
    assert got == {"intel_iommu": "on", "nvidia_drm.modeset": "0", "vfio_iommu_type1.allow_unsafe_interrupts": "1"}


def test_container_settings_keep_name_and_image_only_of_what_agents_match() -> None:
    inspected = {"Name": "/io-worker-vc", "Config": {"Image": "ionetcontainers/io-worker-vc:latest", "Env": ["SECRET=1"]},
                 "HostConfig": {"NetworkMode": "bridge"}}
    got = container_settings(inspected)
    assert got is not None
    assert (got["name"], got["image"]) == ("io-worker-vc", "ionetcontainers/io-worker-vc:latest")
    assert "SECRET=1" not in repr(got)


# ------------------------------------------------------------------ the checks


def account(name: str, groups: list[str], sudo: Any) -> dict[str, Any]:
    return {"name": name, "uid": 999, "shell": "/bin/bash", "groups": groups, "sudo": sudo}


def sudo_view(scope: str, rule: str = VAST_RULE, giving: list[str] | None = None, io_logging: bool = False,
              syslog: bool = True) -> dict[str, Any]:
    rules = [] if scope == "none" else [{"file": "/etc/sudoers", "line": 31, "rule": rule, "nopasswd": True, "commands": 1}]
    return {"scope": scope, "rules": rules, "root_giving": giving or [], "io_logging": io_logging, "syslog": syslog,
            "logfile": False, "files_read": ["/etc/sudoers"], "unreadable": [], "unparsed_lines": 0}


def vast(sudo: Any = None, groups: list[str] | None = None, channel: bool = True) -> dict[str, Any]:
    return {"id": "vast", "platform": "Vast.ai", "evidence": ["account vastai_kaalia", "unit vastai.service"],
            "accounts": [account("vastai_kaalia", ["docker"] if groups is None else groups,
                                 sudo_view("unrestricted") if sudo is None else sudo)],
            "units": [{"name": "vastai.service", "present": True, "enabled": "enabled", "active": True}],
            "update_channel": ["/var/lib/vastai_kaalia/update_launcher.sh"] if channel else [], "packages": []}


SALAD = {"id": "salad", "platform": "Salad (Linux beta)", "evidence": ["unit crisper.service"], "accounts": [],
         "units": [], "update_channel": [], "packages": ["salad-platform"]}


def facts(*agents: dict[str, Any], containers: Any = (), extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "agents": {"installed": list(agents), "update_units": {"apt-daily.timer": "enabled"},
                   "sudo_activity": {"since": "2026-12-01T00:00:00Z", "entries": 0, "commands": []}},
        "docker": {"containers": containers if isinstance(containers, Unknown) else list(containers)},
    }
    for key, value in (extra or {}).items():
        out.setdefault(key, {}).update(value)
    return out


def gpus(*ecc: Any) -> dict[str, Any]:
    return {"gpu": {"devices": [{"index": i, "name": "NVIDIA A100-PCIE-40GB", "ecc_enabled": e} for i, e in enumerate(ecc)]}}


PERSONAL = {"isolation": {"graphical_session": True, "display_manager": "gdm3", "credentials": [], "unreadable_homes": []}}
DEDICATED = {"isolation": {"graphical_session": False, "display_manager": None, "credentials": [], "unreadable_homes": []}}
# Docker's random names, io.net's images (as `docker ps` listings in io.net setup guides show them).
IONET_CONTAINERS = [{"name": "goofy_vaughan", "image": "ionetcontainers/io-worker-monitor"},
                    {"name": "friendly_meninsky", "image": "ionetcontainers/io-worker-vc:latest"}]
NOT_SUPPORTED = Unknown("not supported by this GPU/driver")

CASES = [
    # (check, facts, status, measured)
    ("AGT-1010", facts(), "pass", 0),
    ("AGT-1010", facts(vast()), "fail", 1),
    ("AGT-1010", facts(vast(sudo=DENIED)), "fail", 1),  # the docker group settles it without sudoers
    ("AGT-1010", facts(vast(sudo=DENIED, groups=[])), "unknown", 0),
    ("AGT-1010", facts(vast(sudo=sudo_view("restricted", giving=["/usr/bin/virsh *"]), groups=[])), "fail", 1),
    ("AGT-1010", facts(vast(sudo=sudo_view("restricted", rule="vastai_kaalia ALL=(root) NOPASSWD: /usr/bin/ss *"),
                            groups=[])), "pass", 0),
    ("AGT-1010", facts(SALAD), "fail", 1),
    ("AGT-1010", facts(containers=IONET_CONTAINERS), "fail", 1),  # io.net, known only by its containers
    ("AGT-1010", facts(containers=Unknown("permission denied")), "pass", 0),
    ("OWN-1050", facts(vast(), extra=PERSONAL), "fail", "agent root on a personal machine"),
    ("OWN-1050", facts(vast(), extra=DEDICATED), "pass", "dedicated machine"),
    ("OWN-1050", facts(extra=PERSONAL), "pass", "no agent with root"),
    ("OWN-1050", facts(vast(), extra={"isolation": {"graphical_session": Unknown("no logind")}}), "unknown", None),
    ("AGT-1020", facts(vast()), "fail", 1),
    ("AGT-1020", facts(vast(channel=False)), "fail", 1),  # the installer writes it; it may be unreadable
    ("AGT-1020", facts(SALAD), "pass", 0),  # signed apt packages, installed by the owner's own updates
    ("AGT-1020", facts(containers=IONET_CONTAINERS), "fail", 1),
    ("AGT-1030", facts(vast()), "pass", 1),
    ("AGT-1030", facts(vast(), SALAD), "fail", 2),
    ("AGT-1030", facts(vast(), containers=IONET_CONTAINERS), "fail", 2),
    ("AGT-1030", facts(vast(), containers=Unknown("permission denied")), "unknown", 1),
    ("AGT-1030", facts(), "pass", 0),
    ("AGT-1040", facts(containers=IONET_CONTAINERS, extra=gpus(False, True)), "fail", 1),
    ("AGT-1040", facts(containers=IONET_CONTAINERS, extra=gpus(NOT_SUPPORTED)), "pass", 0),
    ("AGT-1040", facts(containers=IONET_CONTAINERS, extra=gpus(Unknown("NVML unavailable"))), "unknown", None),
    ("AGT-1040", facts(vast(), extra=gpus(False)), "pass", 0),  # ECC off, but not the agent's doing
    ("AGT-1050", facts(vast(), extra={"packages": {"unattended_upgrades": {"installed": False, "enabled": False}}}),
     "fail", "removed"),
    ("AGT-1050", facts(vast(), extra={"packages": {"unattended_upgrades": {"installed": True, "enabled": True}},
                                      "agents": {"update_units": {"apt-daily.timer": "masked"}}}), "fail", "removed"),
    ("AGT-1050", facts(vast(), extra={"packages": {"unattended_upgrades": {"installed": True, "enabled": True}}}),
     "pass", "kept"),
    ("AGT-1050", facts(SALAD, extra={"packages": {"unattended_upgrades": {"installed": False}}}), "pass", "not changed"),
    ("AGT-1060", facts(vast()), "fail", "not logged"),
    ("AGT-1060", facts(vast(sudo=sudo_view("unrestricted", io_logging=True))), "pass", "logged"),
    ("AGT-1060", facts(vast(sudo=DENIED)), "unknown", None),
    ("AGT-1060", facts(SALAD), "pass", "no agent account"),
]


@pytest.mark.parametrize(("check_id", "given", "status", "measured"), CASES)
def test_agent_checks(check_id: str, given: dict[str, Any], status: str, measured: Any) -> None:
    outcome = run_check(REGISTRY[check_id], given, None)
    assert (outcome.status, outcome.measured) == (status, measured), outcome.detail


def test_every_agent_check_has_table_cases_for_pass_and_fail() -> None:
    ids = {c for c in REGISTRY if c.startswith("AGT-")} | {"OWN-1050"}
    for check_id in ids:
        statuses = {status for c, _, status, _ in CASES if c == check_id}
        assert {"pass", "fail"} <= statuses, check_id


def test_root_detail_names_the_account_and_the_rule() -> None:
    outcome = run_check(REGISTRY["AGT-1010"], facts(vast()), None)
    assert outcome.detail == ("the platform has root on this machine: Vast.ai: vastai_kaalia may run any command as "
                              f"root without a password: `{VAST_RULE}` (/etc/sudoers:31)")


def test_two_agents_name_the_conflict_from_the_sources() -> None:
    outcome = run_check(REGISTRY["AGT-1030"], facts(vast(), SALAD), None)
    assert "Salad (Linux beta)" in outcome.detail and "Vast.ai" in outcome.detail
    assert "allows no other docker or containerd" in outcome.detail


def test_gpus_bound_to_vfio_are_part_of_the_conflict() -> None:
    tensordock = {"id": "tensordock", "platform": "TensorDock", "evidence": ["account tensordock"],
                  "accounts": [account("tensordock", ["tensordock"], sudo_view("unrestricted"))],
                  "units": [], "update_channel": [], "packages": []}
    given = facts(vast(), tensordock, extra={"agents": {"kernel_params": {"vfio-pci.ids": "10de:2684,10de:22ba"}}})
    outcome = run_check(REGISTRY["AGT-1030"], given, None)
    assert outcome.status == "fail" and "vfio-pci.ids=10de:2684,10de:22ba" in outcome.detail


def test_a_missing_agents_section_is_unknown_never_a_pass() -> None:
    outcome = run_check(REGISTRY["AGT-1010"], {"meta": {}}, None)
    assert outcome.status == "unknown"


# ------------------------------------------------------------------ the report's words


def with_agent(name: str, *agents: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(load_snapshot(SNAPSHOTS / f"{name}.json"))
    data["agents"] = {"installed": list(agents), "update_units": {}, "sudo_activity": Unknown("not root")}
    return data


def test_dedicated_machine_with_vast_agent_is_medium_and_says_the_platform_has_root() -> None:
    report = build_report(with_agent("dedicated-4090", vast()), resolve_policies(["vast"]))
    risk = report.owner_risk
    high_or_medium = {r.id for r in risk.findings if r.status == "warn"}
    assert risk.rating == "medium" and {"AGT-1010", "AGT-1020"} <= high_or_medium
    assert report.headline.endswith(
        "owner risk MEDIUM (installing the provider agent hands the platform root on this machine; "
        "the agent fetches and runs code from its platform as root).")
    assert risk.statement.startswith("MEDIUM because of: installing the provider agent hands the platform root")
    assert f"`{VAST_RULE}` (/etc/sudoers:31)" in risk.statement


def test_personal_machine_with_vast_agent_is_high_and_names_the_agent_first_class() -> None:
    report = build_report(with_agent("reference-laptop", vast()), resolve_policies(["vast"]))
    risk = report.owner_risk
    assert risk.rating == "high"
    assert "installing the provider agent hands the platform root on this personal machine" in report.headline
    assert "vastai_kaalia may run any command as root without a password" in risk.statement


def test_the_owner_risk_statement_names_the_items_that_are_high() -> None:
    """Two machines rated HIGH for different reasons get different statements, each naming its own items."""
    laptop = build_report(load_snapshot(SNAPSHOTS / "reference-laptop.json"), resolve_policies(["vast"])).owner_risk
    high = [r for r in laptop.findings if r.status == "warn" and r.level == "high"]
    assert high
    for row in high:
        assert row.note in laptop.statement
    agent = build_report(with_agent("ubuntu-desktop-dedicated", vast()), resolve_policies(["vast"])).owner_risk
    assert agent.statement != laptop.statement


# ------------------------------------------------------------------ explain and the catalog


def test_explain_vast_gives_what_it_takes_with_sources_and_dates() -> None:
    proc = hostcheck("explain", "vast")
    assert proc.returncode == 0, proc.stderr
    assert "vastai_kaalia ALL=(ALL) NOPASSWD:ALL" in proc.stdout
    catalog = load_catalog()
    for take in catalog.get("vast").takes:  # type: ignore[union-attr]
        source = catalog.sources[take.source]
        assert take.what in proc.stdout and source.url in proc.stdout and f"checked {source.checked}" in proc.stdout


def test_explain_agents_covers_every_platform() -> None:
    proc = hostcheck("explain", "agents")
    assert proc.returncode == 0, proc.stderr
    for platform in ("Vast.ai", "Salad (Linux beta)", "io.net", "TensorDock"):
        assert f"{platform} host agent" in proc.stdout


def test_catalog_refuses_a_claim_without_a_source() -> None:
    raw = load_catalog().model_dump(mode="json")
    raw["agents"][0]["takes"][0]["source"] = "nowhere"
    with pytest.raises(ValueError, match="unknown source key"):
        Catalog.model_validate(raw)
