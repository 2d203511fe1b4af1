"""The firewall's dead-man switch, triggered for real: a ruleset that shuts out the very
machine applying it. The run loses the host (a fresh SSH connection is refused), and the
previous ruleset and configuration come back by themselves:

- by the transient timer, when nobody touches the host; the next normal run then finds
  nothing to change;
- by a reboot inside the dead-man window (from the console: SSH is shut out). The transient
  timer dies with the boot, so what comes back must be the persistent ruleset from before the
  change, and SSH with it: the role writes the persistent file and the boot unit only after
  the run has confirmed access.

Both on one host, one after the other: each starts from a good ruleset of its own
(play.firewall_lockout applies it first), so either can also run alone.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.lab.nspawn import LabHost
from tests.lab.util import wait_for
from tests.lanes.profile import play

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root, pytest.mark.lab_cost(150)]

TIMER_SECONDS = 20
# Long enough that the timer cannot be what lets the run back in after the reboot.
REBOOT_WINDOW_SECONDS = 600


@pytest.fixture(scope="module")
def host(lab) -> Iterator[LabHost]:
    started = lab.start_hosts(1)
    try:
        yield started[0]
    finally:
        lab.stop_hosts(started)


def test_unconfirmed_ruleset_is_rolled_back_by_the_timer(host: LabHost, tmp_path) -> None:
    lock = play.firewall_lockout(host, tmp_path, TIMER_SECONDS)
    assert "Prove that a fresh SSH connection still gets in" in lock.result.output

    while host.run("true", timeout=8).rc != 0:
        assert time.monotonic() - lock.started < TIMER_SECONDS + 60, "the dead-man switch never fired"
        time.sleep(1)
    assert time.monotonic() - lock.started >= TIMER_SECONDS - 1

    assert host.sudo("nft list table inet hostcheck").stdout == lock.table
    assert host.sudo("cat /etc/hostcheck/firewall.nft").stdout == lock.config
    assert "dead-man switch fired" in host.sudo("journalctl -b -t hostcheck-firewall --no-pager").stdout
    again = play.run_playbook(host.inventory_path, lock.firewall_playbook)
    assert again.rc == 0 and again.stats(host.name)["changed"] == 0, again.changed_tasks


def test_reboot_inside_the_deadman_window_boots_the_previous_ruleset(host: LabHost, tmp_path) -> None:
    lock = play.firewall_lockout(host, tmp_path, REBOOT_WINDOW_SECONDS)

    # Restart from the console, as an owner at the keyboard would.
    boots = host.boots()
    subprocess.run(["nsenter", "-t", str(host.leader_pid()), "-a", "systemctl", "reboot"],
                   capture_output=True, timeout=30, check=False)
    wait_for(f"{host.name} to restart", lambda: host.boots() > boots, 120)
    host.wait_ssh(120)
    assert time.monotonic() - lock.started < REBOOT_WINDOW_SECONDS, "the timer, not the reboot, may have restored it"

    assert host.sudo("nft list table inet hostcheck").stdout == lock.table
    assert host.sudo("cat /etc/hostcheck/firewall.nft").stdout == lock.config
    assert host.sudo("systemctl is-active hostcheck-firewall.service").stdout.strip() == "active"
    # this boot's journal: the timer armed before the reboot never ran
    assert "dead-man switch fired" not in host.sudo("journalctl -b -t hostcheck-firewall --no-pager").stdout
    again = play.run_playbook(host.inventory_path, lock.firewall_playbook)
    assert again.rc == 0 and again.stats(host.name)["changed"] == 0, again.changed_tasks
