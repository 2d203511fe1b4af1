"""The firewall's dead-man switch across a reboot: a ruleset that shuts out the machine
applying it is loaded, the run loses the host, and the host is restarted inside the dead-man
window (from its console: SSH is shut out). The transient timer dies with the boot, so what
comes back must be the persistent ruleset from before the change, and SSH with it: the role
writes the persistent file and the boot unit only after the run has confirmed access.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.lab.util import wait_for
from tests.profile import play

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root, pytest.mark.lab_cost(120)]

# Long enough that the timer cannot be what lets the run back in.
DEADMAN_SECONDS = 600


def test_reboot_inside_the_deadman_window_boots_the_previous_ruleset(lab_host, tmp_path) -> None:
    host = lab_host
    lock = play.firewall_lockout(host, tmp_path, DEADMAN_SECONDS)

    # Restart from the console, as an owner at the keyboard would.
    boots = host.boots()
    subprocess.run(["nsenter", "-t", str(host.leader_pid()), "-a", "systemctl", "reboot"],
                   capture_output=True, timeout=30, check=False)
    wait_for(f"{host.name} to restart", lambda: host.boots() > boots, 120)
    host.wait_ssh(120)
    assert time.monotonic() - lock.started < DEADMAN_SECONDS, "the timer, not the reboot, may have restored it"

    assert host.sudo("nft list table inet hostcheck").stdout == lock.table
    assert host.sudo("cat /etc/hostcheck/firewall.nft").stdout == lock.config
    assert host.sudo("systemctl is-active hostcheck-firewall.service").stdout.strip() == "active"
    assert "dead-man switch fired" not in host.sudo("journalctl -t hostcheck-firewall --no-pager").stdout
    again = play.run_playbook(host.inventory_path, lock.firewall_playbook)
    assert again.rc == 0 and again.stats(host.name)["changed"] == 0, again.changed_tasks
