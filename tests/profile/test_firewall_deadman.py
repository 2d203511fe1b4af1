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
    firewall_only = play.write_playbook(tmp_path, "firewall.yml", ["firewall"])
    good = play.run_playbook(host.inventory_path, firewall_only)
    assert good.rc == 0, good.describe()
    table = host.sudo("nft list table inet hostcheck").stdout
    config = host.sudo("cat /etc/hostcheck/firewall.nft").stdout
    assert "policy drop" in table

    started = time.monotonic()
    bad = play.run_playbook(host.inventory_path, firewall_only,
                            extra_vars={"firewall_admin_ranges": ["192.0.2.0/24"],
                                        "firewall_deadman_seconds": DEADMAN_SECONDS, "ansible_ssh_timeout": 5})
    assert bad.rc != 0 and bad.stats(host.name)["unreachable"] == 1, bad.describe()
    assert "Prove that a fresh SSH connection still gets in" in bad.output

    host.close_ssh_masters()
    assert host.run("true", timeout=8).rc != 0, "the bad ruleset must really shut SSH out"
    while host.run("true", timeout=8).rc != 0:
        assert time.monotonic() - started < DEADMAN_SECONDS + 60, "the dead-man switch never fired"
        time.sleep(1)
    assert time.monotonic() - started >= DEADMAN_SECONDS - 1

    assert host.sudo("nft list table inet hostcheck").stdout == table
    assert host.sudo("cat /etc/hostcheck/firewall.nft").stdout == config
    assert "dead-man switch fired" in host.sudo("journalctl -t hostcheck-firewall --no-pager").stdout
    again = play.run_playbook(host.inventory_path, firewall_only)
    assert again.rc == 0 and again.stats(host.name)["changed"] == 0, again.changed_tasks
