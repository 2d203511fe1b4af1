"""sshd's refusals and failure path: no run leaves the admin shut out, or the host between
"sshd changed" and "firewall applied" without saying so.

The lockout guard: a run whose admin could not log in afterwards stops before anything on the
host changes (site.yml runs the guard before the first role), with a message that says what to
fix.

Each case names a different admin through ssh_hardening_admin_user (the run itself still
connects as the lab's admin, with its key): an account without any authorized key, one whose
key sshd would ignore (a world-writable authorized_keys under StrictModes), one that does not
exist, and the real admin excluded by AllowUsers. The positive case (the admin has a key) is
the converge in test_profile_lifecycle.py.

Then, on the same host with sshd started by ssh.socket (Ubuntu 24.04's layout): a Port setting
that the socket would not serve is refused before sshd changes, and a drop-in that sshd reads
before the profile's (PasswordAuthentication yes) makes the verification fail after sshd was
changed: the run stops there, sshd still answers, the firewall role after it never runs, and
the message says what the host has and how to finish.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.lab.nspawn import LabHost
from tests.lanes.profile import play

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root]

CASES = {
    "no_key": ({"ssh_hardening_admin_user": "bob"}, "no authorized key for bob"),
    "ignored_key": ({"ssh_hardening_admin_user": "carol"}, "sshd would ignore the key: /home/carol/.ssh/authorized_keys"),
    "no_account": ({"ssh_hardening_admin_user": "nosuchuser"}, "the account nosuchuser does not exist"),
    "not_allowed": ({"ssh_hardening_allow_users": ["someoneelse"]}, "admin is not in ssh_hardening_allow_users"),
}


@dataclass
class Guarded:
    host: LabHost
    before: play.Snapshot
    after: play.Snapshot
    sshd_before: str
    sshd_after: str
    plays: dict[str, play.PlayResult] = field(default_factory=dict)
    probes: dict[str, str] = field(default_factory=dict)


DROPIN = "/etc/ssh/sshd_config.d/01-hostcheck.conf"
# sshd keeps the first value it reads, and reads its drop-ins in name order: this one wins.
EARLIER_DROPIN = "/etc/ssh/sshd_config.d/00-local.conf"


def socket_cases(host: LabHost, tmp: Path, g: Guarded) -> None:
    """sshd started by ssh.socket: the refused Port change, then the failed verification."""
    host.sudo("systemctl disable --now ssh.service && systemctl enable --now ssh.socket", check=True)
    host.close_ssh_masters()
    ssh_only = play.write_playbook(tmp, "ssh.yml", ["ssh_hardening"],
                                   vars_={"ssh_hardening_extra_settings": {"Port": 2222}})
    g.plays["socket_port"] = play.run_playbook(host.inventory_path, ssh_only)
    g.probes["dropin_after_port"] = host.sudo(f"test -e {DROPIN} && echo present || echo absent").stdout.strip()
    g.probes["sshd_after_port"] = host.sudo("sshd -T").stdout
    host.sudo(f"printf 'PasswordAuthentication yes\\n' > {EARLIER_DROPIN}", check=True)
    g.probes["sshd_before_failure"] = host.sudo("sshd -T").stdout
    then_firewall = play.write_playbook(tmp, "ssh-then-firewall.yml", ["ssh_hardening", "firewall"])
    g.plays["verify_fails"] = play.run_playbook(host.inventory_path, then_firewall)
    host.close_ssh_masters()
    g.probes["login_after_failure"] = host.run("id -un").stdout.strip()
    g.probes["tables_after_failure"] = host.sudo("nft list tables").stdout
    g.probes["socket_after_failure"] = host.sudo("systemctl is-active ssh.socket").stdout.strip()
    g.probes["dropin_after_failure"] = host.sudo(f"test -e {DROPIN} && echo present || echo absent").stdout.strip()


@pytest.fixture(scope="module")
def guarded(lab, tmp_path_factory) -> Iterator[Guarded]:
    host = lab.start_hosts(1)[0]
    try:
        host.sudo(
            "set -e; useradd -m -s /bin/bash bob; useradd -m -s /bin/bash carol; "
            "install -d -o carol -g carol -m 700 /home/carol/.ssh; "
            "cp /home/admin/.ssh/authorized_keys /home/carol/.ssh/authorized_keys; "
            "chown carol:carol /home/carol/.ssh/authorized_keys; chmod 666 /home/carol/.ssh/authorized_keys",
            check=True)
        sshd_before = host.sudo("sshd -T").stdout
        before = play.snapshot(host)
        plays = {name: play.run_playbook(host.inventory_path, "site.yml", extra_vars=extra)
                 for name, (extra, _) in CASES.items()}
        after = play.snapshot(host)
        g = Guarded(host, before, after, sshd_before, host.sudo("sshd -T").stdout, plays)
        socket_cases(host, tmp_path_factory.mktemp("sshd"), g)
        yield g
    finally:
        lab.stop_hosts([host])


@pytest.mark.parametrize("case", sorted(CASES))
def test_guard_stops_the_run_with_the_reason(guarded: Guarded, case: str) -> None:
    result = guarded.plays[case]
    flat = " ".join(result.output.split())
    assert result.rc != 0, result.describe()
    assert "ssh_hardening lockout guard" in flat and "sshd was NOT changed" in flat, result.tail()
    assert CASES[case][1] in flat, result.tail()
    stats = result.stats(guarded.host.name)
    assert stats["failed"] == 1 and stats["changed"] == 0, stats


def test_nothing_changed_on_the_host(guarded: Guarded) -> None:
    """Not only sshd: the guard runs before host_baseline, so no file, unit or package moved."""
    assert guarded.sshd_after == guarded.sshd_before
    assert play.file_diff(guarded.before, guarded.after,
                          ignore=("/var/lib/systemd/timers", "/var/lib/systemd/random-seed")) == {}
    assert guarded.before.packages == guarded.after.packages
    assert "/var/lib/hostcheck-profile" not in guarded.after.files


def test_port_the_socket_would_not_serve_is_refused_before_sshd_changes(guarded: Guarded) -> None:
    result = guarded.plays["socket_port"]
    flat = " ".join(result.output.split())
    assert result.rc != 0, result.describe()
    assert "ssh.socket starts sshd and listens on port(s) 22" in flat, result.tail()
    assert "sets Port" in flat and "sshd was NOT changed" in flat, result.tail()
    # only /run/sshd, which systemd removed with the stopped ssh.service, was (re)created
    assert result.changed_tasks == ["ssh_hardening : Privilege separation directory sshd -t and -T need"], \
        result.changed_tasks
    assert guarded.probes["dropin_after_port"] == "absent"
    assert guarded.probes["sshd_after_port"] == guarded.sshd_before


def test_failed_verification_stops_before_the_firewall_and_says_how_to_finish(guarded: Guarded) -> None:
    result = guarded.plays["verify_fails"]
    flat = " ".join(result.output.split())
    assert result.rc != 0, result.describe()
    # the earlier drop-in really overrides: the failure is the verification's, after sshd changed
    assert "passwordauthentication yes" in guarded.probes["sshd_before_failure"].splitlines()
    assert "ssh_hardening: Verify the effective settings (sshd -T) failed" in flat, result.tail()
    assert "NOT the firewall or any later role" in flat and "sshd runs" in flat, result.tail()
    assert "run site.yml again, or run playbooks/rollback.yml" in flat, result.tail()
    assert guarded.probes["dropin_after_failure"] == "present"
    # the admin still gets in (a fresh connection, started by the socket) ...
    assert guarded.probes["login_after_failure"] == "admin"
    assert guarded.probes["socket_after_failure"] == "active"
    # ... and the firewall role after ssh_hardening never ran
    assert "inet hostcheck" not in guarded.probes["tables_after_failure"]
    assert not any(task.startswith("firewall") for task in result.changed_tasks), result.changed_tasks
