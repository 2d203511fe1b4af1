"""A profile run killed halfway can still be rolled back.

site.yml runs on a fresh host and is killed (the controller dies, SIGKILL) while the Docker
engine is being installed: the manifest then holds a package entry that was never finalized.
playbooks/rollback.yml must still bring /etc and /var/lib, the packages, the accounts and the
units back to the pre-profile state.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.lab.remote import Result
from tests.lab.util import wait_for
from tests.lanes.profile import play

# The whole test is one long call (a converge killed midway, the orphaned apt run, a rollback
# that purges the engine): ~35 s on an idle 2-core machine, more under load; the timeout covers
# both waits below, each far more than 3x what it takes.
pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root, pytest.mark.timeout(1200),
              pytest.mark.lab_cost(60)]
ENGINE_INSTALL_WITHIN_S = 600
ORPHANS_FINISH_WITHIN_S = 300

PACKAGE_MANAGER_STATE = ("/var/lib/apt", "/var/lib/dpkg", "/var/lib/ucf")
IDLE_NOISE = ("/var/lib/systemd/timers", "/var/lib/systemd/random-seed", "/var/lib/systemd/journal")
IDLE_UNITS = ("apt-daily.service", "apt-daily-upgrade.service", "apt-daily.timer", "apt-daily-upgrade.timer",
              "systemd-tmpfiles-clean.service", "systemd-tmpfiles-clean.timer", "e2scrub_all.service",
              "e2scrub_all.timer", "man-db.service", "man-db.timer", "dpkg-db-backup.service",
              "dpkg-db-backup.timer", "logrotate.service", "logrotate.timer", "fstrim.service", "fstrim.timer")
# Passive targets stay active once reached (see test_profile_lifecycle.REACHED_TARGETS).
REACHED_TARGETS = ("network-pre.target", "network-online.target")


def test_rollback_after_a_run_killed_during_the_engine_install(lab_host, tmp_path) -> None:
    host = lab_host
    before = play.snapshot(host)
    log = tmp_path / "site.log"
    proc = play.start_playbook(host.inventory_path, "site.yml", log=log)
    deadline = time.monotonic() + ENGINE_INSTALL_WITHIN_S
    interrupted_at = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            entries = play.manifest_entries(host)
            if any(e["kind"] == "packages" and e["key"] == "docker.io" and not e["finalized"] for e in entries):
                os.killpg(proc.pid, signal.SIGKILL)
                interrupted_at = len(entries)
                break
            time.sleep(0.3)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert interrupted_at, f"never saw the unfinalized docker.io entry:\n{log.read_text()[-3000:]}"
    # The controller is gone; whatever it had started on the host (apt) finishes on its own.
    # pgrep exits 1 when nothing matches; the bracket keeps -f from matching the shell and
    # sudo that run it.
    busy = "pgrep -x apt-get || pgrep -x dpkg || pgrep -f '[p]ython3.*AnsiballZ'"

    def settled() -> Result | None:
        result = host.sudo(busy)
        return None if result.rc == 0 else result

    done = wait_for("apt and the orphaned module to finish after the controller died", settled,
                    ORPHANS_FINISH_WITHIN_S, 0.5)
    assert done.rc == 1, f"could not tell whether apt is still running: rc={done.rc} {done.stderr}"

    rollback = play.run_playbook(host.inventory_path, "rollback.yml")
    assert rollback.rc == 0, rollback.describe()
    after = play.snapshot(host)
    assert play.file_diff(before, after, ignore=IDLE_NOISE + PACKAGE_MANAGER_STATE) == {}
    assert before.packages == after.packages, {
        "left": sorted(set(after.packages) - set(before.packages)),
        "lost": sorted(set(before.packages) - set(after.packages))}
    assert (before.users, before.groups, before.holds) == (after.users, after.groups, after.holds)
    assert play.unit_diff(before, after, ignore_active=IDLE_UNITS + REACHED_TARGETS) == {}
