"""Local isolation on a real host: the provider account the profile creates cannot read the
humans' files, logins (SSH, su) get umask 027, core dumps are off, uncommon network protocols
are kept out of the kernel, sshd logs at VERBOSE; rollback puts every home and file back.

The host starts the way the issue found it: a human account whose home is 0755 with a
world-readable notes file, which any other account (``nobody`` here, before the provider
account exists) can read. Kernel-side effects (a module really refused by modprobe) need a
kernel of the host's own: in this lane the modprobe configuration is verified as modprobe
reads it (``modprobe --showconfig``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.lab.nspawn import LabHost
from tests.lanes.profile import play
from tests.lanes.profile.test_profile_lifecycle import IDLE_NOISE, PACKAGE_MANAGER_STATE

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root, pytest.mark.lab_cost(280)]

ROLES = ["host_baseline", "ssh_hardening", "isolation"]
# What this lane looks at: homes, umask and core dumps at login, the protocol blacklist, sshd's
# log level. The rest of host_baseline is the profile lifecycle's (Debian 12 and 13).
VARS = {"host_baseline_time_sync": False, "host_baseline_journald": False, "host_baseline_security_updates": False,
        "host_baseline_logind_ignore_lid": False, "host_baseline_smartmontools": False,
        "host_baseline_mask_sleep": False}
SECRET = "private notes of a human account"


@dataclass
class Local:
    host: LabHost
    probes: dict[str, Any] = field(default_factory=dict)
    plays: dict[str, play.PlayResult] = field(default_factory=dict)
    snaps: dict[str, play.Snapshot] = field(default_factory=dict)


def modes(host: LabHost) -> str:
    return host.sudo("stat -c '%n %a' /home/alice /home/admin").stdout


def read_as(host: LabHost, user: str, path: str) -> Any:
    return host.sudo(f"sudo -u {user} cat {path}")


@pytest.fixture(scope="module")
def local(lab, tmp_path_factory) -> Iterator[Local]:
    host = lab.start_hosts(1)[0]
    life = Local(host)
    tmp = tmp_path_factory.mktemp("local")
    playbook = play.write_playbook(tmp, "local.yml", ROLES, vars_=VARS)
    try:
        host.sudo(f"useradd -m -s /bin/bash alice && chmod 0755 /home/alice /home/admin && "
                  f"echo '{SECRET}' > /home/alice/notes.txt && chmod 0644 /home/alice/notes.txt && "
                  f"chown alice: /home/alice/notes.txt && cp -p /home/alice/notes.txt /home/admin/notes.txt && "
                  f"chown admin: /home/admin/notes.txt", check=True)
        p = life.probes
        p["modes_before"] = modes(host)
        p["nobody_reads_before"] = read_as(host, "nobody", "/home/alice/notes.txt")
        life.snaps["before"] = play.snapshot(host)

        life.plays["converge"] = play.run_playbook(host.inventory_path, playbook)
        assert life.plays["converge"].rc == 0, life.plays["converge"].describe()
        life.plays["rerun"] = play.run_playbook(host.inventory_path, playbook)
        p["modes_converged"] = modes(host)
        p["provider_reads_alice"] = read_as(host, "gpuprovider", "/home/alice/notes.txt")
        p["provider_reads_admin"] = read_as(host, "gpuprovider", "/home/admin/notes.txt")
        p["provider_lists_alice"] = host.sudo("sudo -u gpuprovider ls /home/alice")
        p["provider_reads_etc"] = read_as(host, "gpuprovider", "/etc/hostname")
        p["nobody_reads_converged"] = read_as(host, "nobody", "/home/alice/notes.txt")
        p["alice_reads_own"] = read_as(host, "alice", "/home/alice/notes.txt")
        p["login_umask"] = host.sudo("su - alice -c umask").stdout.strip()
        p["root_umask"] = host.sudo("su - root -c umask").stdout.strip()
        # A new SSH connection: the one kept open from before the profile has the old umask.
        host.close_ssh_masters()
        p["ssh_umask"] = host.run("umask").stdout.strip()
        p["ssh_new_file"] = host.run("f=$(mktemp -u /tmp/umask.XXXXXX) && touch $f && stat -c %a $f && rm $f").stdout.strip()
        # Services never open a PAM session: the engine keeps systemd's 0022.
        p["service_umask"] = host.sudo("systemd-run --wait --pipe -q sh -c umask").stdout.strip()
        p["core_hard"] = host.sudo("su - alice -c 'ulimit -Hc'").stdout.strip()
        p["root_core_hard"] = host.sudo("su - root -c 'ulimit -Hc'").stdout.strip()
        p["modprobe"] = host.sudo("modprobe --showconfig").stdout
        p["sshd_loglevel"] = host.sudo("sshd -T -C user=admin,host=lab,addr=10.77.0.1 | grep -i '^loglevel'").stdout

        life.plays["rollback"] = play.run_playbook(host.inventory_path, "rollback.yml")
        assert life.plays["rollback"].rc == 0, life.plays["rollback"].describe()
        life.snaps["rolled_back"] = play.snapshot(host)
        p["modes_rolled_back"] = modes(host)
        p["nobody_reads_after"] = read_as(host, "nobody", "/home/alice/notes.txt")
        host.close_ssh_masters()
        p["ssh_umask_after"] = host.run("umask").stdout.strip()
        yield life
    finally:
        lab.stop_hosts([host])


def test_before_the_profile_another_account_reads_a_humans_files(local: Local) -> None:
    """The starting point is the exposure the issue measured (so the test proves the role)."""
    assert local.probes["modes_before"] == "/home/alice 755\n/home/admin 755\n"
    assert local.probes["nobody_reads_before"].stdout.strip() == SECRET


def test_provider_account_cannot_read_any_humans_files(local: Local) -> None:
    p = local.probes
    for key in ("provider_reads_alice", "provider_reads_admin", "provider_lists_alice", "nobody_reads_converged"):
        assert p[key].rc != 0 and "Permission denied" in p[key].stderr, (key, p[key])
    # the account itself works, and the owner still reads their own files
    assert p["provider_reads_etc"].rc == 0
    assert p["alice_reads_own"].stdout.strip() == SECRET


def test_human_homes_are_0750_and_rerun_changes_nothing(local: Local) -> None:
    assert local.probes["modes_converged"] == "/home/alice 750\n/home/admin 750\n"
    rerun = local.plays["rerun"]
    assert rerun.rc == 0 and rerun.stats(local.host.name)["changed"] == 0, rerun.changed_tasks


def test_logins_get_umask_027_and_no_core_dumps(local: Local) -> None:
    """pam_umask (enabled with a pam-auth-update profile) applies UMASK 027 from login.defs to
    every login, human or root, SSH or su; ``nousergroups`` keeps Debian's user private groups
    from turning it into 007. Services do not open PAM sessions and keep 0022. A core dump of
    a crashed process would write its memory (keys, tokens) to disk."""
    p = local.probes
    got = {k: p[k] for k in ("login_umask", "ssh_umask", "root_umask", "ssh_new_file", "service_umask")}
    assert got == {"login_umask": "0027", "ssh_umask": "0027", "root_umask": "0027", "ssh_new_file": "640",
                   "service_umask": "0022"}, got
    assert (p["core_hard"], p["root_core_hard"]) == ("0", "0")


def test_uncommon_protocols_are_blacklisted(local: Local) -> None:
    config = local.probes["modprobe"].splitlines()
    for proto in ("dccp", "sctp", "rds", "tipc"):
        assert f"install {proto} /bin/false" in config
        assert f"blacklist {proto}" in config


def test_sshd_logs_verbose(local: Local) -> None:
    assert local.probes["sshd_loglevel"].split() == ["loglevel", "VERBOSE"]


def test_rollback_reopens_the_homes_and_restores_etc(local: Local) -> None:
    assert local.probes["modes_rolled_back"] == local.probes["modes_before"]
    assert local.probes["nobody_reads_after"].stdout.strip() == SECRET
    assert local.probes["ssh_umask_after"] == "0022"
    diff = play.file_diff(local.snaps["before"], local.snaps["rolled_back"], ignore=PACKAGE_MANAGER_STATE + IDLE_NOISE)
    assert diff == {}
