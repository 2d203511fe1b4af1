"""The SSH lockout guard: a run whose admin could not log in afterwards stops before anything
on the host changes (site.yml runs the guard before the first role), with a message that says
what to fix.

Each case names a different admin through ssh_hardening_admin_user (the run itself still
connects as the lab's admin, with its key): an account without any authorized key, one whose
key sshd would ignore (a world-writable authorized_keys under StrictModes), one that does not
exist, and the real admin excluded by AllowUsers. The positive case (the admin has a key) is
the converge in test_profile_lifecycle.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.lab.nspawn import LabHost
from tests.profile import play

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


@pytest.fixture(scope="module")
def guarded(lab) -> Iterator[Guarded]:
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
        yield Guarded(host, before, after, sshd_before, host.sudo("sshd -T").stdout, plays)
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
