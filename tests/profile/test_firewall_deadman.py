"""The firewall's dead-man switch, triggered for real: a ruleset that shuts out the very
machine applying it. The run loses the host (a fresh SSH connection is refused), the
transient timer fires, and the previous ruleset and configuration come back by themselves;
the next normal run then finds nothing to change.
"""

from __future__ import annotations

import time

import pytest

from tests.profile import play

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root]

DEADMAN_SECONDS = 20


def test_unconfirmed_ruleset_is_rolled_back_by_the_timer(lab_host, tmp_path) -> None:
    host = lab_host
    lock = play.firewall_lockout(host, tmp_path, DEADMAN_SECONDS)
    assert "Prove that a fresh SSH connection still gets in" in lock.result.output

    while host.run("true", timeout=8).rc != 0:
        assert time.monotonic() - lock.started < DEADMAN_SECONDS + 60, "the dead-man switch never fired"
        time.sleep(1)
    assert time.monotonic() - lock.started >= DEADMAN_SECONDS - 1

    assert host.sudo("nft list table inet hostcheck").stdout == lock.table
    assert host.sudo("cat /etc/hostcheck/firewall.nft").stdout == lock.config
    assert "dead-man switch fired" in host.sudo("journalctl -t hostcheck-firewall --no-pager").stdout
    again = play.run_playbook(host.inventory_path, lock.firewall_playbook)
    assert again.rc == 0 and again.stats(host.name)["changed"] == 0, again.changed_tasks
