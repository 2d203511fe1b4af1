"""The host profile's whole life on one real host: dry run, converge, rerun, the provider gate,
and rollback, with the host's state measured from inside and from outside at each stage.

One nspawn lab host (Debian 12, and again Debian 13; real systemd and sshd) is prepared the
way Ubuntu Server ships (Vast requires Ubuntu 22.04/24.04, which the lab cannot build), each
default reproduced with Debian's own packages: ufw enabled with `ufw allow OpenSSH`, sshd
started by ssh.socket with ssh.service disabled (Ubuntu 24.04's layout), cloud-init's sshd
drop-in turning password logins back on and its sudoers file giving `ubuntu` NOPASSWD sudo,
systemd-resolved's 127.0.0.53 stub, needrestart (restarting services on its own, as 24.04's
does) and unattended-upgrades. Plus a human account in the docker group, and hostcheck
installed so the audit gate and the audit reports are real. (The profile's firewall, Docker and isolation on plain Debian 12 are
tests/lanes/profile/test_egress_isolation.py's converge and rollback.) What differs from real Ubuntu: docs/roles.md, "Ubuntu Server's defaults".
The lifecycle runs once per distribution (module fixture; Debian 13 leaves out what only
Ansible decides, see FULL_SUITE); each test then asserts on what was measured, so the tests
can be selected or reordered freely. On Debian 12 the profile is the installed collection,
called as an operator calls it (how_the_profile_is_called); Debian 13 runs the clone's playbooks.

The Docker engine runs in this lane (the host gets the container-side nspawn settings runc
needs: cgroup2-only view, keyring and BPF syscalls, tests/lanes/profile/play.py), so the published
port test uses a real container and Docker's real iptables-nft rules.

Not verifiable in this lane, and therefore not claimed here: kernel.* sysctls (read-only
/proc/sys in a container: the role skips them with a message, see
test_kernel_sysctls_skipped_with_a_message), the NVIDIA path (no GPU: the role's skip is
tested), the XFS data volume (no block device in nspawn).
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
from tests.lab.nspawn import LabHost
from tests.lab.rootfs import SUITES as SUITES_VERSION
from tests.lab.rootfs import UBUNTU_DEFAULT_PACKAGES, ensure_rootfs
from tests.lab.steps import Steps
from tests.lanes.profile import collection, play

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root, pytest.mark.lab_cost(700)]

SUITES = ("bookworm", "trixie")
"""Debian 12 and 13: verified distributions (README's Tests section)."""
FULL_SUITE = "bookworm"
"""The plays whose outcome is Ansible's logic alone (check mode on the converged host, which
skips what is already as wanted; the provider gate's refusals; the docker-group removal;
rollback's refusal while a container exists and its rerun) run on Debian 12 only. Debian 13
runs everything the distribution can change: check mode on the fresh host, converge, rerun,
every probe of the converged host (the firewall's positive control included), the
rollback's dry run and the rollback to the snapshot."""
on_full_suite_only = pytest.mark.parametrize("life", [FULL_SUITE], ids=[f"debian{SUITES_VERSION[FULL_SUITE]}"],
                                             indirect=True)

HOSTCHECK = f"{VENV}/bin/hostcheck"
# Package-manager bookkeeping that installing and purging leaves behind by design (apt's
# auto-installed marks, dpkg's database and logs of what happened, ucf's conffile registry,
# the downloaded lists). The profile does not write these; apt/dpkg do, and a purge is how
# Debian removes a package. Everything else under /etc and /var/lib must come back exactly.
PACKAGE_MANAGER_STATE = ("/var/lib/apt", "/var/lib/dpkg", "/var/lib/ucf")
# Written by systemd and apt over time whether or not anything runs (timer stamps, the
# persistent journal's machine-id link, random seed): they differ between two snapshots of an
# idle host. Measured by test_idle_host_noise_is_what_is_ignored.
IDLE_NOISE = ("/var/lib/systemd/timers", "/var/lib/systemd/random-seed", "/var/lib/systemd/timesync",
              "/var/lib/private/systemd/timesync", "/var/lib/systemd/journal")
# Units whose active state changes on an idle host (timers fire, one-shot services run).
IDLE_UNITS = ("apt-daily.service", "apt-daily-upgrade.service", "apt-daily.timer", "apt-daily-upgrade.timer",
              "systemd-tmpfiles-clean.service", "systemd-tmpfiles-clean.timer", "e2scrub_all.service",
              "e2scrub_all.timer", "man-db.service", "man-db.timer", "dpkg-db-backup.service",
              "dpkg-db-backup.timer", "logrotate.service", "logrotate.timer", "fstrim.service", "fstrim.timer")
# Passive targets: once reached (network-pre.target, pulled in by the firewall unit;
# network-online.target, by docker.service) they stay active until shutdown. They carry no
# configuration, and stopping network-online.target would stop every unit that requires it,
# so rollback leaves them; their enablement is still compared.
REACHED_TARGETS = ("network-pre.target", "network-online.target")
AGENT_UNITS = ("vastai.service", "vast_metrics.service", "crisper.service", "spinner.service")
AUDIT = f"{HOSTCHECK} audit --policy dedicated-host --offline --format json --timeout 60"
CLOUD_SUDOERS = "/etc/sudoers.d/90-cloud-init-users"
PROVIDER_ACCOUNT = ("getent passwd gpuprovider; id -nG gpuprovider; stat -c '%a %U %G' /srv/gpuprovider; "
                    "getent shadow gpuprovider | cut -d: -f2")
RENTAL_CONTAINER = "C.4242"
"""Named as Vast's agent names a rental's container (hostcheck/selftest/safety.py)."""
SELFTEST = f"{HOSTCHECK} selftest --yes --minutes 1 --format json"
STANDIN_HOOK = "/usr/local/bin/nvidia-container-runtime-hook"
LAB_ADMIN_SUDOERS = "/etc/sudoers.d/90-lab-admin"
"""The lab admin's own NOPASSWD rule (tests/lab/rootfs.py): Ansible connects as that account."""
OPENED_PORT = 8082
"""A host service the profile opens (firewall_allowed_tcp_ports): ufw would still drop it."""
RESTART_PROBE_BIN = "/usr/local/sbin/hostcheck-restart-probe"
RESTART_PROBE_UNIT = "hostcheck-restart-probe.service"
"""A service that needrestart_after_an_upgrade leaves on an old binary."""
# The sysctls ufw's start (every boot, every `ufw reload`) writes from /etc/ufw/sysctl.conf and
# host_baseline sets too: the two fought over them while ufw stayed enabled.
UFW_SYSCTLS = "net.ipv4.conf.all.log_martians net.ipv4.conf.default.log_martians net.ipv4.conf.all.accept_redirects"


@dataclass
class Lifecycle:
    host: LabHost
    suite: str
    plays: dict[str, play.PlayResult] = field(default_factory=dict)
    snaps: dict[str, play.Snapshot] = field(default_factory=dict)
    probes: dict[str, Any] = field(default_factory=dict)
    audits: dict[str, dict[str, str]] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)


def audit_findings(host: LabHost) -> dict[str, dict[str, Any]]:
    result = host.sudo(AUDIT, timeout=180)
    assert result.rc in (0, 3), f"audit failed rc={result.rc}: {result.stderr[-2000:]}"
    report = json.loads(result.stdout)
    (policy,) = report["policies"]
    return {f["id"]: f for f in policy["findings"]}


def audit_statuses(host: LabHost) -> dict[str, str]:
    return {i: f["status"] for i, f in audit_findings(host).items()}


def flat(text: str) -> str:
    """Ansible folds long messages over lines; compare on single spaces."""
    return " ".join(text.split())


def outside(host: LabHost, port: int) -> str:
    return host.tcp_from_outside(port, timeout=3.0)


def sshd_effective(host: LabHost) -> dict[str, str]:
    out = host.sudo("sshd -T -C user=admin,host=lab,addr=10.77.0.1").stdout
    return {k: v for k, _, v in (line.partition(" ") for line in out.splitlines())}


def unit_states(host: LabHost, units: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    states = {}
    for unit in units:
        enabled = host.sudo(f"systemctl is-enabled {unit}").stdout.strip() or "not-found"
        active = host.sudo(f"systemctl is-active {unit}").stdout.strip()
        states[unit] = (enabled, active)
    return states


def booted_state(host: LabHost) -> dict[str, Any]:
    """What a boot could undo: the sysctls ufw's start writes, ufw's verdict, the profile's
    table, and who starts sshd."""
    host.close_ssh_masters()
    return {"sysctls": host.sudo(f"sysctl {UFW_SYSCTLS}").stdout,
            "ufw": host.sudo("ufw status").stdout.strip(),
            "ruleset": host.sudo("nft list table inet hostcheck").stdout,
            "sshd": unit_states(host, ("ssh.socket", "ssh.service")),
            "login": host.run("id -un").stdout.strip()}


def build_test_image(host: LabHost) -> None:
    """A tiny image from the host's own python and what its extension modules link (no registry
    is reachable from the lab), with python3 on its PATH as a renter's image has."""
    python = host.sudo("readlink -f /usr/bin/python3", check=True).stdout.strip()  # python3.11 / 3.13
    version = python.rsplit("/", 1)[1]
    host.sudo(
        f"set -e; cd /tmp; libs=$(ldd {python} /usr/lib/{version}/lib-dynload/*.so | grep -v ':$' | grep -o '/[^ ]*' | sort -u); "
        f"tar -ch {python} /usr/bin/python3 $libs /usr/lib/{version} --exclude=/usr/lib/{version}/test 2>/dev/null "
        f"| docker import -c 'ENTRYPOINT [\"{python}\"]' - labpy >/dev/null",
        timeout=120, check=True)


# Budgets of the set-up's steps: at least 3x a cold run on the 2-core CI machine (cold: an
# empty lab cache; the figures are in README's Tests section). A step over budget fails with
# its name, its time and the last lines of its output (tests/lab/steps.py).
BUDGET = {"rootfs": 1200, "boot": 180, "install hostcheck": 300, "prepare": 300, "check": 600, "converge": 1200, "rerun": 600,
          "probes": 1200, "play": 600, "rollback": 900, "reboot": 180, "collection": 300}


@pytest.fixture(scope="module", params=SUITES, ids=[f"debian{SUITES_VERSION[s]}" for s in SUITES])
def life(request: pytest.FixtureRequest, lab, tmp_path_factory) -> Iterator[Lifecycle]:
    """The lifecycle on a Debian 12 host and on a Debian 13 host (one after the other, or on
    two xdist workers at once: each is a lane group of its own, tests/lab/lanes.py)."""
    suite = request.param
    steps = Steps(f"profile lifecycle [{suite}]")
    with steps.step(f"rootfs {suite}", BUDGET["rootfs"]):
        ensure_rootfs(suite=suite)  # built once into the lab cache (`python -m tests.lab build`)
    with steps.step("boot", BUDGET["boot"]), play.docker_capable_env():
        host = lab.start_hosts(1, nspawn_args=play.DOCKER_NSPAWN_ARGS, password_auth=True, suite=suite)[0]
    life = Lifecycle(host, suite)
    tmp = tmp_path_factory.mktemp(f"profile-{suite}")
    P = functools.partial(play.playbook_step, steps)
    inventory = host.inventory_path
    # The lab's kmod package stands in for an NVIDIA driver package (none exists here): the
    # hold mechanism is the same, and rollback must release it.
    test_vars = {"provider_vast_enabled": True, "host_baseline_hold_extra_packages": ["kmod"],
                 "firewall_allowed_tcp_ports": [OPENED_PORT], "isolation_remove_cloud_sudo_rules": True}
    try:
        # ---- the host as it might come from a cloud image --------------------------------
        with steps.step("install hostcheck", BUDGET["install hostcheck"]):
            install_hostcheck(host, build_wheelhouse(tmp / "wheelhouse", host.rootfs.python))
        with steps.step("prepare", BUDGET["prepare"]):
            prepare(host, life)
        converge_and_probe(P, steps, host, life, inventory, tmp, test_vars)
        yield life
    finally:
        lab.stop_hosts([host])


def probe_converged(P: Any, host: LabHost, life: Lifecycle, inventory: Path, tmp: Path) -> None:
    """What the converged host looks like, from inside and from outside."""
    p = life.probes
    host.close_ssh_masters()
    p["key_login"] = host.run("id -un")
    p["sudo"] = host.run("sudo -n id -u")
    p["password_login"] = host.password_login(host.admin_password)
    p["sshd"] = sshd_effective(host)
    p["dropin_stat"] = host.sudo("stat -c '%U %G %a' /etc/ssh/sshd_config.d/01-hostcheck.conf").stdout.strip()
    p["dropins"] = sorted(host.sudo("ls /etc/ssh/sshd_config.d").stdout.split())
    p["ruleset"] = host.sudo("nft list table inet hostcheck").stdout
    p["tables"] = host.sudo("nft list tables").stdout
    host.sudo("setsid nohup python3 -m http.server 8081 >/dev/null 2>&1 < /dev/null &", check=True)
    time.sleep(1)
    p["listener_inside"] = host.sudo("nc -z -w2 127.0.0.1 8081 && echo open").stdout.strip()
    p["listener_outside"] = outside(host, 8081)
    p["ssh_outside"] = outside(host, 22)
    host.sudo("pkill -f '[h]ttp.server 8081'")
    host.sudo(f"setsid nohup python3 -m http.server {OPENED_PORT} >/dev/null 2>&1 < /dev/null &", check=True)
    time.sleep(1)
    p["opened_outside"] = outside(host, OPENED_PORT)
    host.sudo(f"pkill -f '[h]ttp.server {OPENED_PORT}'")
    p["ssh_layout"] = unit_states(host, ("ssh.socket", "ssh.service", "ufw.service"))
    p["ufw_status"] = host.sudo("ufw status").stdout.strip()
    build_test_image(host)
    host.sudo("docker run -d --name web -p 8080:80 labpy -m http.server 80", check=True)
    time.sleep(2)
    ip = host.sudo("docker inspect -f '{{.NetworkSettings.IPAddress}}' web").stdout.strip()
    p["container_inside"] = host.sudo(f"curl -s -o /dev/null -w '%{{http_code}}' http://{ip}:80/").stdout
    p["published_outside"] = outside(host, 8080)
    p["container_no_new_privs"] = host.sudo(
        "docker run --rm labpy -c \"print(open('/proc/self/status').read())\" | grep NoNewPrivs").stdout.split()
    # Positive control: the same probe sees the port once the forward path allows it.
    control = play.write_playbook(tmp, "firewall-open.yml", ["firewall"],
                                  vars_={"firewall_forward_allowed_ports": [8080]})
    life.plays["control_open"] = P("control_open", BUDGET["play"], inventory, control)
    p["published_outside_when_allowed"] = outside(host, 8080)
    life.plays["control_close"] = P("control_close", BUDGET["play"], inventory,
                                    play.write_playbook(tmp, "firewall.yml", ["firewall"]))
    p["published_outside_again"] = outside(host, 8080)
    p["docker_info"] = json.loads(host.sudo("docker info --format '{{json .}}'").stdout)
    p["daemon_json"] = json.loads(host.sudo("cat /etc/docker/daemon.json").stdout)
    p["units"] = unit_states(host, ("sleep.target", "suspend.target", "hibernate.target", "hybrid-sleep.target",
                                    "hostcheck-firewall.service", "docker.service", "apt-daily.timer",
                                    "apt-daily-upgrade.timer", *AGENT_UNITS))
    p["sysctl"] = host.sudo("sysctl net.ipv4.ip_forward net.ipv4.conf.all.accept_redirects "
                            "net.ipv4.conf.all.send_redirects net.ipv4.tcp_syncookies").stdout
    p["apt_config"] = host.sudo("apt-config dump Unattended-Upgrade APT::Periodic").stdout
    p["holds"] = host.sudo("apt-mark showhold").stdout.split()
    p["manifest_perms"] = host.sudo("stat -c '%a %U %G' /var/lib/hostcheck-profile "
                                    "/var/lib/hostcheck-profile/manifest.json").stdout.split("\n")
    life.manifest = json.loads(host.sudo("cat /var/lib/hostcheck-profile/manifest.json").stdout)
    p["provider_stage"] = host.sudo("stat -c '%n %a %U' /opt/hostcheck-provider /opt/hostcheck-provider/vast "
                                    "/opt/hostcheck-provider/vast/install.sh").stdout
    p["install_script"] = host.sudo("cat /opt/hostcheck-provider/vast/install.sh").stdout
    p["provider_user"] = host.sudo(PROVIDER_ACCOUNT).stdout
    p["docker_group_converged"] = host.sudo("getent group docker").stdout.strip()


# Ubuntu Server's defaults, with Debian's packages (prefetched into the rootfs: rootfs.UBUNTU_DEFAULT_PACKAGES).
# resolved gets the lab's resolver as its upstream (on Ubuntu, the DHCP lease's); ufw.service is
# started as a boot would (its rules are loaded already, so it only records that); the switch to
# ssh.socket keeps this session (KillMode=process) and the next connection starts sshd from it.
UBUNTU_DEFAULTS = f"""set -e
printf 'PasswordAuthentication yes\\n' > /etc/ssh/sshd_config.d/50-cloud-init.conf
systemctl reload ssh
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends {' '.join(UBUNTU_DEFAULT_PACKAGES)} >/dev/null
mkdir -p /etc/systemd/resolved.conf.d
printf '[Resolve]\\nDNS=10.0.2.3\\n' > /etc/systemd/resolved.conf.d/lab-upstream.conf
systemctl restart systemd-resolved
useradd -m -s /bin/bash -G sudo ubuntu
printf '# Created by cloud-init\\n\\n# User rules for ubuntu\\nubuntu ALL=(ALL) NOPASSWD:ALL\\n' > /etc/sudoers.d/90-cloud-init-users
chmod 440 /etc/sudoers.d/90-cloud-init-users
ufw allow OpenSSH >/dev/null
ufw --force enable >/dev/null
systemctl start ufw.service
systemctl disable --now ssh.service
systemctl enable --now ssh.socket
"""

# Ubuntu 24.04's needrestart restarts what an apt run left on old libraries without asking,
# unattended-upgrades included; Debian's does not, so its own setting stands in for that.
NEEDRESTART_STANDIN = """printf '$nrconf{restart} = '"'a'"';\\n' > /etc/needrestart/conf.d/50-ubuntu-noble-restarts.conf"""
# A service an upgrade leaves on an old file: a copy of sleep, its unit under /run (gone again
# before the next snapshot or boot).
RESTART_PROBE = f"""set -e
cp /usr/bin/sleep {RESTART_PROBE_BIN}
printf '[Service]\\nExecStart={RESTART_PROBE_BIN} infinity\\n' > /run/systemd/system/{RESTART_PROBE_UNIT}
systemctl daemon-reload
systemctl start {RESTART_PROBE_UNIT}
"""


def needrestart_after_an_upgrade(host: LabHost) -> dict[str, str]:
    """The probe service's binary replaced as a package upgrade replaces files, then needrestart
    run as apt runs it at the end of a transaction (no terminal, noninteractive): the service's
    PID before and after, and what needrestart printed. The service is removed afterwards."""
    pid = f"systemctl show -p MainPID --value {RESTART_PROBE_UNIT}"
    host.sudo(RESTART_PROBE, check=True)
    try:
        before = host.sudo(pid, check=True).stdout.strip()
        host.sudo(f"cp /usr/bin/sleep {RESTART_PROBE_BIN}.new && mv -f {RESTART_PROBE_BIN}.new {RESTART_PROBE_BIN}",
                  check=True)
        output = host.sudo("DEBIAN_FRONTEND=noninteractive needrestart </dev/null", timeout=120).stdout
        return {"pid_before": before, "pid_after": host.sudo(pid, check=True).stdout.strip(), "output": output}
    finally:
        host.sudo(f"systemctl stop {RESTART_PROBE_UNIT}; rm -f /run/systemd/system/{RESTART_PROBE_UNIT} "
                  f"{RESTART_PROBE_BIN}; systemctl daemon-reload", check=True)


def prepare(host: LabHost, life: Lifecycle) -> None:
    """The host as Ubuntu Server ships it (UBUNTU_DEFAULTS), a human in the docker group; two
    snapshots of it idle, and its runtime network state."""
    host.sudo(UBUNTU_DEFAULTS, timeout=120, check=True)
    host.sudo(NEEDRESTART_STANDIN, check=True)
    life.probes["needrestart_before"] = needrestart_after_an_upgrade(host)
    host.sudo("groupadd docker && useradd -m -s /bin/bash -G docker alice", check=True)
    host.close_ssh_masters()
    life.probes["ssh_layout_before"] = unit_states(host, ("ssh.socket", "ssh.service", "ufw.service"))
    life.probes["tables_before"] = host.sudo("nft list tables").stdout
    life.probes["runtime_before"] = play.runtime_snapshot(host)
    life.probes["password_login_before"] = host.password_login(host.admin_password)
    life.snaps["idle_a"] = play.snapshot(host)
    time.sleep(2)
    life.snaps["before"] = play.snapshot(host)


@dataclass
class Profile:
    """How this suite's lifecycle calls the profile: its playbook, its rollback playbook, and
    where they run from."""
    inventory: Path
    playbook: str
    rollback: str
    project: Path | None = None
    extra_vars: dict[str, Any] | None = None

    def where(self) -> dict[str, Any]:
        """Where the playbooks run from: the operator's directory, or the clone (the default)."""
        return {"project": self.project} if self.project else {}

    def kwargs(self) -> dict[str, Any]:
        return self.where() or {"extra_vars": self.extra_vars}


def how_the_profile_is_called(steps: Steps, host: LabHost, suite: str, tmp: Path,
                              test_vars: dict[str, Any]) -> Profile:
    """Debian 12 (FULL_SUITE) takes the roles the way an operator with an Ansible repository of
    their own does: the collection built from this repository, installed from its tarball by a
    requirements.yml into that directory's own collections path, the roles called by their full
    names from the operator's playbook, inventory and group_vars (tests/lanes/profile/
    collection.py), and the collection's rollback playbook. Debian 13 runs site.yml and
    rollback.yml from the clone. Both run the same role files; on Debian 12 the clone's site.yml
    in check mode on the converged host and its rollback.yml run after the collection's
    rollback show the two ways agree."""
    if suite != FULL_SUITE:
        return Profile(host.inventory_path, "site.yml", "rollback.yml", extra_vars=test_vars)
    with steps.step("collection build and install", BUDGET["collection"]):
        tarball = collection.build(tmp / "dist")
        project = collection.user_project(tmp / "operator", tarball, host.inventory_line(), test_vars)
    return Profile(project / "inventory.ini", "profile.yml", f"{collection.FQCN}.rollback", project=project)


def converge_and_probe(P: Any, steps: Steps, host: LabHost, life: Lifecycle, inventory: Path, tmp: Path,
                       test_vars: dict[str, Any]) -> None:
    """Dry run, converge, rerun, what the converged host looks like, the provider gate and
    the refusals (FULL_SUITE), and the rollback, each play a budgeted step."""
    profile = how_the_profile_is_called(steps, host, life.suite, tmp, test_vars)
    # ---- dry run on the fresh host ----------------------------------------------------
    life.plays["check"] = P("check", BUDGET["check"], profile.inventory, profile.playbook, check=True, diff=True,
                            **profile.kwargs())
    life.snaps["after_check"] = play.snapshot(host)
    before = audit_findings(host)
    life.audits["before"] = {i: f["status"] for i, f in before.items()}
    life.probes["audit_before"] = before

    # ---- converge, then rerun ---------------------------------------------------------
    life.plays["converge"] = P("converge", BUDGET["converge"], profile.inventory, profile.playbook,
                               **profile.kwargs())
    assert life.plays["converge"].rc == 0, life.plays["converge"].describe()
    # ufw's reload (what its start at boot does too) must change nothing now; the rerun shows it
    life.probes["sysctls_before_ufw_reload"] = host.sudo(f"sysctl {UFW_SYSCTLS}").stdout
    life.probes["ufw_reload"] = host.sudo("ufw reload")
    life.probes["sysctls_after_ufw_reload"] = host.sudo(f"sysctl {UFW_SYSCTLS}").stdout
    life.plays["rerun"] = P("rerun", BUDGET["rerun"], profile.inventory, profile.playbook, **profile.kwargs())
    life.probes["needrestart_converged"] = needrestart_after_an_upgrade(host)
    life.snaps["converged"] = play.snapshot(host)
    if life.suite == FULL_SUITE:
        # the clone's site.yml on the host the collection converged
        life.plays["check_converged"] = P("check_converged", BUDGET["check"], inventory, "site.yml",
                                          extra_vars=test_vars, check=True)
    converged = audit_findings(host)
    life.audits["converged"] = {i: f["status"] for i, f in converged.items()}
    life.probes["audit_converged"] = converged
    life.probes["cloud_sudoers_converged"] = host.sudo(f"test -e {CLOUD_SUDOERS} && echo present || echo gone").stdout.strip()
    # ufw enabled again by hand beside the profile's table: the audit names both, and the port
    # the profile opens that ufw drops; then back to the converged state
    host.sudo("ufw --force enable", check=True)
    life.probes["audit_ufw_reenabled"] = audit_findings(host)
    host.sudo("ufw disable", check=True)
    if life.suite != FULL_SUITE:
        # A boot starts ufw.service again (its unit stays enabled): the profile's sysctls, its
        # table and the socket-started sshd must be what comes back. The probes below then
        # measure the booted host.
        life.probes["before_boot"] = booted_state(host)
        with steps.step("reboot", BUDGET["reboot"]):
            host.reboot(timeout=BUDGET["reboot"])
        life.probes["after_boot"] = booted_state(host)
        # one-shot units that run only at the first boot after /usr or /etc changed: active
        # after the lab host's first boot, skipped (inactive) after this one
        life.probes["first_boot_units"] = host.sudo(
            "grep -l -E '^Condition(NeedsUpdate|FirstBoot)=' /usr/lib/systemd/system/*.service"
            " | xargs -n1 basename").stdout.split()

    # ---- what the converged host looks like -------------------------------------------
    with steps.step("probes", BUDGET["probes"]):
        probe_converged(P, host, life, inventory, tmp)

    if life.suite == FULL_SUITE:
        gate_and_refusals(P, host, life, inventory, tmp, test_vars)

    # ---- rollback -----------------------------------------------------------------------
    p = life.probes
    host.sudo("docker rm -f web && docker rmi labpy", check=True)
    life.snaps["before_rollback"] = play.snapshot(host)
    life.plays["rollback_check"] = P("rollback_check", BUDGET["rollback"], inventory, "rollback.yml", check=True,
                                     diff=True)
    life.snaps["after_rollback_check"] = play.snapshot(host)
    life.plays["rollback"] = P("rollback", BUDGET["rollback"], profile.inventory, profile.rollback, **profile.where())
    life.snaps["rolled_back"] = play.snapshot(host)
    if life.suite == FULL_SUITE:
        # the clone's rollback.yml after the collection's: nothing is left to undo
        life.plays["rollback_again"] = P("rollback_again", BUDGET["rollback"], inventory, "rollback.yml")
    host.close_ssh_masters()
    p["password_login_after_rollback"] = host.password_login(host.admin_password)
    p["tables_after_rollback"] = host.sudo("nft list tables").stdout
    p["runtime_after_rollback"] = play.runtime_snapshot(host)
    p["manifest_dir_after_rollback"] = host.sudo("test -e /var/lib/hostcheck-profile && echo present || echo gone").stdout.strip()
    life.audits["rolled_back"] = audit_statuses(host)


def gate_and_refusals(P: Any, host: LabHost, life: Lifecycle, inventory: Path, tmp: Path,
                      test_vars: dict[str, Any]) -> None:
    """The provider gate's three refusals, the docker-group removal when told, and rollback's
    refusal while a container exists (FULL_SUITE only)."""
    p = life.probes
    # ---- the provider gate -----------------------------------------------------------
    gate_vars = {**test_vars, "provider_vast_audit_command": [
        HOSTCHECK, "audit", "--policy", "vast", "--format", "json", "--offline", "--timeout", "60"]}
    life.plays["enable_no_ack"] = P("enable_no_ack", BUDGET["play"], inventory, "provider-enable.yml",
                                    extra_vars={**gate_vars, "provider_enable": True})
    life.plays["enable_not_enabled"] = P(
        "enable_not_enabled", BUDGET["play"], inventory, "provider-enable.yml",
        extra_vars={**gate_vars, "provider_enable": False, "provider_acknowledgement": play.ACKNOWLEDGEMENT})
    life.plays["enable_audit_blocks"] = P(
        "enable_audit_blocks", BUDGET["play"], inventory, "provider-enable.yml",
        extra_vars={**gate_vars, "provider_enable": True, "provider_acknowledgement": play.ACKNOWLEDGEMENT})
    p["units_after_gate"] = unit_states(host, AGENT_UNITS)
    p["installed_marker"] = host.sudo("ls /opt/hostcheck-provider/vast/ /var/lib/hostcheck-profile/").stdout
    p["ruleset_after_gate"] = host.sudo("nft list table inet hostcheck").stdout

    # ---- isolation, told to remove a sudoers file that names the account it connects as --
    refuse = play.write_playbook(tmp, "isolation-own-sudo.yml", ["isolation"], vars_={
        "isolation_remove_cloud_sudo_rules": True, "isolation_cloud_sudoers_files": [LAB_ADMIN_SUDOERS]})
    life.plays["cloud_sudo_own_account"] = P("cloud_sudo_own_account", BUDGET["play"], inventory, refuse)
    p["lab_admin_sudoers_after_refusal"] = host.sudo(f"test -e {LAB_ADMIN_SUDOERS} && echo present").stdout.strip()

    # ---- isolation, told to remove humans from the docker group, with the provider account
    # changed behind the profile's back (shell, a supplementary group, password field) -----
    host.sudo("usermod -s /bin/bash -a -G users -p '*' gpuprovider", check=True)
    iso = play.write_playbook(tmp, "isolation.yml", ["isolation"], vars_={"isolation_remove_docker_members": True})
    life.plays["isolation_remove"] = P("isolation_remove", BUDGET["play"], inventory, iso)
    p["docker_group_after_removal"] = host.sudo("getent group docker").stdout.strip()
    p["provider_account_after_drift"] = host.sudo(PROVIDER_ACCOUNT).stdout

    # ---- hostcheck selftest beside a rental's container, through the real Docker daemon ----
    host.sudo(f"docker run -d --name {RENTAL_CONTAINER} labpy -m http.server 81", check=True)
    p["selftest_beside_rental"] = host.sudo(SELFTEST, timeout=180)
    host.sudo(f"docker rm -f {RENTAL_CONTAINER}", check=True)
    p["selftest_without_rental"] = host.sudo(f"{SELFTEST} --accept-owner-risk --in-container labpy", timeout=180)
    # Docker registers its NVIDIA device driver when nvidia-container-runtime-hook is on its PATH
    # as it starts. A stand-in hook that mounts nothing lets `--gpus all` start the container
    # the way the NVIDIA runtime does, without a GPU: the stages' worker runs inside on the
    # image's own python3 and finds no driver mounted.
    host.sudo(f"printf '#!/bin/sh\\ncat >/dev/null\\n' >{STANDIN_HOOK} && chmod 755 {STANDIN_HOOK} "
              "&& systemctl restart docker", check=True)
    p["selftest_in_container"] = host.sudo(f"{SELFTEST} --accept-owner-risk --in-container labpy", timeout=180)
    p["selftest_containers_left"] = host.sudo("docker ps -aq --filter name=hostcheck-selftest").stdout.strip()
    host.sudo(f"rm -f {STANDIN_HOOK} && systemctl restart docker", check=True)

    # ---- rollback while a container exists ----------------------------------------------
    p["manifest_before_refusal"] = host.sudo("cat /var/lib/hostcheck-profile/manifest.json").stdout
    life.plays["rollback_with_container"] = P("rollback_with_container", BUDGET["rollback"], inventory,
                                              "rollback.yml")
    p["manifest_after_refusal"] = host.sudo("cat /var/lib/hostcheck-profile/manifest.json").stdout


# ---- check mode ---------------------------------------------------------------------------

def test_idle_host_noise_is_what_is_ignored(life: Lifecycle) -> None:
    """The paths ignored when comparing snapshots are only those an idle host changes by itself."""
    noise = play.file_diff(life.snaps["idle_a"], life.snaps["before"])
    assert all(any(path.startswith(p) for p in IDLE_NOISE) for path in noise), noise


def test_check_mode_on_a_fresh_host_fails_nothing_and_shows_the_changes(life: Lifecycle) -> None:
    """--check --diff is how an operator previews the profile: it must run through, and show."""
    result = life.plays["check"]
    assert result.rc == 0, result.describe()
    stats = result.stats(life.host.name)
    assert stats["failed"] == 0 and stats["unreachable"] == 0
    assert stats["changed"] > 10, "a fresh host needs changes; the dry run must show them"
    assert "+PasswordAuthentication no" in result.output      # the sshd drop-in's diff
    assert "policy drop;" in result.output                     # the ruleset's diff
    assert '"no-new-privileges": true' in result.output        # daemon.json's diff


def test_check_mode_changes_nothing(life: Lifecycle) -> None:
    """Hashes, modes and owners of /etc and /var/lib, unit states and packages are equal
    before and after the dry run."""
    before, after = life.snaps["before"], life.snaps["after_check"]
    assert play.file_diff(before, after, ignore=IDLE_NOISE) == {}
    assert play.unit_diff(before, after, ignore_active=IDLE_UNITS) == {}
    assert before.packages == after.packages
    assert (before.users, before.groups, before.holds) == (after.users, after.groups, after.holds)


@on_full_suite_only
def test_check_mode_on_the_converged_host_reports_no_change(life: Lifecycle) -> None:
    """The clone's site.yml, on the host the installed collection converged: the two agree."""
    result = life.plays["check_converged"]
    assert result.argv[3].endswith("playbooks/site.yml")
    assert result.rc == 0, result.describe()
    assert result.stats(life.host.name)["changed"] == 0, result.changed_tasks


# ---- converge and idempotence ---------------------------------------------------------------

def test_converge_succeeds(life: Lifecycle) -> None:
    stats = life.plays["converge"].stats(life.host.name)
    assert stats["failed"] == 0 and stats["unreachable"] == 0


def test_second_run_changes_nothing(life: Lifecycle) -> None:
    result = life.plays["rerun"]
    assert result.rc == 0, result.describe()
    assert result.stats(life.host.name)["changed"] == 0, f"changed on rerun: {result.changed_tasks}"


# ---- SSH --------------------------------------------------------------------------------------

def test_key_login_works_and_admin_can_sudo(life: Lifecycle) -> None:
    assert life.probes["key_login"].stdout.strip() == "admin", life.probes["key_login"]
    assert life.probes["sudo"].stdout.strip() == "0", life.probes["sudo"]


def test_password_login_refused_despite_cloud_init_drop_in(life: Lifecycle) -> None:
    """Before: cloud-init's drop-in let the real password in. After: the same password is
    refused, because the profile's 01- drop-in is read first and sshd keeps the first value."""
    assert life.probes["password_login_before"].rc == 0, life.probes["password_login_before"]
    after = life.probes["password_login"]
    assert after.rc == 255 and "Permission denied" in after.stderr, after


def test_effective_sshd_settings(life: Lifecycle) -> None:
    sshd = life.probes["sshd"]
    assert sshd["passwordauthentication"] == "no"
    assert sshd["kbdinteractiveauthentication"] == "no"
    assert sshd["permitrootlogin"] == "no"
    assert sshd["pubkeyauthentication"] == "yes"
    assert sshd["authenticationmethods"] == "publickey"
    assert sshd["x11forwarding"] == "no"


def test_sshd_stays_socket_activated(life: Lifecycle) -> None:
    """Ubuntu 24.04's layout before and after: ssh.socket starts sshd, ssh.service stays
    disabled; the converge restarted the socket-started sshd (a reload kills it) and it runs."""
    before, after = life.probes["ssh_layout_before"], life.probes["ssh_layout"]
    assert before["ssh.socket"] == ("enabled", "active") and before["ssh.service"][0] == "disabled", before
    assert after["ssh.socket"] == ("enabled", "active"), after
    assert after["ssh.service"] == ("disabled", "active"), "started by the socket for this run's connections"
    assert any(task.endswith("ssh_hardening : Restart the socket-started sshd")
               for task in life.plays["converge"].changed_tasks)


def test_sshd_drop_in_is_root_only_and_first(life: Lifecycle) -> None:
    assert life.probes["dropin_stat"] == "root root 600"
    assert life.probes["dropins"][0] == "01-hostcheck.conf", life.probes["dropins"]
    assert "50-cloud-init.conf" in life.probes["dropins"]


# ---- firewall ---------------------------------------------------------------------------------

def test_only_ssh_reaches_the_host_from_outside(life: Lifecycle) -> None:
    """A listener on a port nobody opened is up inside and dropped from outside; SSH passes."""
    p = life.probes
    assert p["listener_inside"] == "open"
    assert p["listener_outside"] == "timeout"
    assert p["ssh_outside"] == "open"


def test_published_container_port_does_not_bypass_the_policy(life: Lifecycle) -> None:
    """Docker publishes 8080 with its own iptables-nft DNAT and accept rules; the hostcheck
    forward chain still drops it. The control shows the same probe does see the port when the
    forward path allows it, so the drop is the policy, not a broken container."""
    p = life.probes
    assert p["container_inside"] == "200"
    assert p["published_outside"] == "timeout"
    assert life.plays["control_open"].rc == 0, life.plays["control_open"].describe()
    assert p["published_outside_when_allowed"] == "open"
    assert p["published_outside_again"] == "timeout"
    assert "table ip nat" in p["tables"], "Docker's own NAT table must exist for this test to mean anything"


def test_opened_port_reaches_the_host_through_ufws_defaults(life: Lifecycle) -> None:
    """firewall_allowed_tcp_ports opens a host service from the admin side: ufw, which drops it
    by default, has been taken over (disabled, its rules kept in its files for rollback)."""
    assert life.probes["opened_outside"] == "open"
    assert life.probes["ufw_status"] == "Status: inactive"
    assert life.probes["ssh_layout"]["ufw.service"][0] == "enabled", "ufw's unit stays as it was"


def test_ufw_reload_changes_nothing(life: Lifecycle) -> None:
    """`ufw reload` (ufw's start at boot runs the same code) leaves the profile's sysctls as they
    are and loads no rules: the rerun after it reports changed=0 (test_second_run_changes_nothing)."""
    assert life.probes["ufw_reload"].rc == 0, life.probes["ufw_reload"]
    assert "not enabled" in life.probes["ufw_reload"].stdout, life.probes["ufw_reload"]
    assert life.probes["sysctls_after_ufw_reload"] == life.probes["sysctls_before_ufw_reload"]
    assert "net.ipv4.conf.all.log_martians = 1" in life.probes["sysctls_after_ufw_reload"]


@pytest.mark.parametrize("life", [s for s in SUITES if s != FULL_SUITE],
                         ids=[f"debian{SUITES_VERSION[s]}" for s in SUITES if s != FULL_SUITE], indirect=True)
def test_a_boot_keeps_the_profiles_sysctls_table_and_sshd(life: Lifecycle) -> None:
    """After a reboot ufw's unit has run its start again: it loads nothing and writes none of
    /etc/ufw/sysctl.conf, so the values are the converged ones (log_martians on, which ufw's
    file turns off; ufw enabled by hand just before had turned it off), and the socket still
    starts sshd for a key login."""
    before, after = life.probes["before_boot"], life.probes["after_boot"]
    assert "net.ipv4.conf.all.log_martians = 0" in before["sysctls"], "ufw's own start writes its sysctls"
    assert after["sysctls"] == life.probes["sysctls_before_ufw_reload"], "the converged values"
    assert "net.ipv4.conf.all.log_martians = 1" in after["sysctls"]
    assert after["ruleset"] == before["ruleset"]
    assert after["ufw"] == "Status: inactive"
    assert after["sshd"] == {"ssh.socket": ("enabled", "active"), "ssh.service": ("disabled", "active")}, after["sshd"]
    assert after["login"] == "admin"


def test_audit_says_which_firewall_decides(life: Lifecycle) -> None:
    """Before the profile ufw is the firewall (NET-1010 names it); with ufw enabled again by
    hand beside the profile's table, the audit names both and finds the port the profile opens
    that ufw drops (NET-1080), from the real rules ufw and the profile loaded."""
    before, both = life.probes["audit_before"], life.probes["audit_ufw_reenabled"]
    assert (before["NET-1010"]["status"], before["NET-1010"]["measured"]) == ("pass", "ufw: input drop"), before["NET-1010"]
    assert before["NET-1080"]["measured"] == "no hostcheck table", before["NET-1080"]
    assert both["NET-1010"]["measured"] == "the hostcheck table and ufw: input drop", both["NET-1010"]
    assert (both["NET-1080"]["status"], both["NET-1080"]["measured"]) == ("warn", f"ufw drops {OPENED_PORT}/tcp"), \
        both["NET-1080"]
    assert life.audits["converged"]["NET-1080"] == "pass"


def test_audit_points_at_cloud_inits_drop_in(life: Lifecycle) -> None:
    """SSH-1010 before the profile: the failing value comes from cloud-init's drop-in, and sshd
    is started by ssh.socket."""
    finding = life.probes["audit_before"]["SSH-1010"]
    assert finding["status"] == "fail"
    assert "set in /etc/ssh/sshd_config.d/50-cloud-init.conf" in finding["detail"], finding
    assert "ssh.socket" in finding["detail"], finding


def test_audit_flags_the_cloud_users_passwordless_sudo(life: Lifecycle) -> None:
    """cloud-init's rule giving `ubuntu` root without a password, found with its file and line
    (the lab's own admin has such a rule too, and is named as well)."""
    finding = life.probes["audit_before"]["ISO-1070"]
    assert finding["status"] == "warn", finding
    assert "ubuntu: NOPASSWD (/etc/sudoers.d/90-cloud-init-users:4)" in finding["measured"], finding


def test_cloud_users_passwordless_sudo_removed_when_told(life: Lifecycle) -> None:
    """isolation_remove_cloud_sudo_rules: cloud-init's file is gone after the converge (rollback
    brings it back: test_rollback_restores_every_path), ISO-1070 no longer names `ubuntu`; the
    lab's admin, the account Ansible connects as, keeps its own rule and is still named."""
    assert life.probes["cloud_sudoers_converged"] == "gone"
    measured = life.probes["audit_converged"]["ISO-1070"]["measured"]
    assert "ubuntu" not in measured and "admin: NOPASSWD (/etc/sudoers.d/90-lab-admin:1)" in measured, measured


@on_full_suite_only
def test_removing_the_sudo_rule_of_the_account_ansible_connects_as_is_refused(life: Lifecycle) -> None:
    result = life.plays["cloud_sudo_own_account"]
    flat = " ".join(result.output.split())
    assert result.rc != 0, result.describe()
    assert f"{LAB_ADMIN_SUDOERS} gives sudo to admin, the account this run connects as" in flat, result.tail()
    assert "Nothing was removed" in flat
    assert life.probes["lab_admin_sudoers_after_refusal"] == "present"
    assert not result.changed_tasks, result.changed_tasks


def test_ruleset_shape(life: Lifecycle) -> None:
    ruleset = life.probes["ruleset"]
    assert re.search(r"chain input \{\s+type filter hook input priority filter - 10; policy drop;", ruleset)
    assert re.search(r"chain forward \{\s+type filter hook forward priority filter - 10; policy drop;", ruleset)
    assert f"elements = {{ {life.host.ip.rsplit('.', 1)[0]}.1 }}" in ruleset, "admin range = this run's source"
    assert "40000-40199" not in ruleset, "provider ports stay closed until an agent is enabled"


# ---- Docker -----------------------------------------------------------------------------------

def test_daemon_json_is_hardened_and_in_effect(life: Lifecycle) -> None:
    daemon, info = life.probes["daemon_json"], life.probes["docker_info"]
    assert daemon["no-new-privileges"] is True and daemon["icc"] is False
    assert daemon["userland-proxy"] is False and daemon["live-restore"] is True
    assert daemon["log-opts"] == {"max-size": "50m", "max-file": "3"}
    assert "runtimes" not in daemon, "no NVIDIA GPU here: no NVIDIA runtime"
    assert info["LiveRestoreEnabled"] is True
    # Docker 20.10 does not list no-new-privileges in SecurityOptions; the kernel says it.
    assert life.probes["container_no_new_privs"] == ["NoNewPrivs:", "1"], life.probes["container_no_new_privs"]
    assert life.probes["units"]["docker.service"] == ("enabled", "active")


# ---- baseline ---------------------------------------------------------------------------------

def test_sleep_targets_masked(life: Lifecycle) -> None:
    for target in ("sleep.target", "suspend.target", "hibernate.target", "hybrid-sleep.target"):
        assert life.probes["units"][target][0] == "masked", (target, life.probes["units"][target])


def test_forwarding_stays_on_for_docker(life: Lifecycle) -> None:
    sysctl = life.probes["sysctl"]
    assert "net.ipv4.ip_forward = 1" in sysctl
    assert "net.ipv4.conf.all.accept_redirects = 0" in sysctl
    assert "net.ipv4.conf.all.send_redirects = 0" in sysctl


def test_kernel_sysctls_skipped_with_a_message(life: Lifecycle) -> None:
    out = life.plays["converge"].output
    assert "/proc/sys/kernel is read-only here" in out
    assert not life.host.testinfra().file("/etc/sysctl.d/60-hostcheck-kernel.conf").exists


def test_security_only_updates_no_reboot(life: Lifecycle) -> None:
    cfg = life.probes["apt_config"]
    origins = re.findall(r'Unattended-Upgrade::Origins-Pattern:: "([^"]*)"', cfg)
    assert origins and all("Debian-Security" in o for o in origins), origins
    assert 'Unattended-Upgrade::Automatic-Reboot "false";' in cfg
    assert 'APT::Periodic::Unattended-Upgrade "1";' in cfg
    assert life.probes["units"]["apt-daily-upgrade.timer"][0] == "enabled"


def test_needrestart_lists_but_never_restarts_a_service(life: Lifecycle) -> None:
    """Ubuntu's automatic restarts (stood in for) restart the probe service before the profile;
    after it, needrestart still names the service and leaves it running."""
    before, after = life.probes["needrestart_before"], life.probes["needrestart_converged"]
    assert before["pid_before"] != before["pid_after"], before
    assert "Restarting services" in before["output"], before["output"]
    assert after["pid_before"] == after["pid_after"] != "0", after
    assert f"systemctl restart {RESTART_PROBE_UNIT}" in after["output"], after["output"]
    assert "Restarting services" not in after["output"], after["output"]


def test_hold_applied(life: Lifecycle) -> None:
    assert "kmod" in life.probes["holds"]


# ---- isolation --------------------------------------------------------------------------------

def test_provider_account_is_unprivileged_and_its_data_closed(life: Lifecycle) -> None:
    out = life.probes["provider_user"].splitlines()
    assert out[0].endswith(":/srv/gpuprovider:/usr/sbin/nologin"), out
    assert out[1].split() == ["gpuprovider"], "no docker, no sudo"
    assert out[2] == "750 gpuprovider gpuprovider"
    assert out[3] == "!", "locked password"


@on_full_suite_only
def test_provider_account_changed_by_hand_is_put_back(life: Lifecycle) -> None:
    """The role skips the user module when the databases show the account as wanted; a
    changed shell, group or password field is not as wanted."""
    result = life.plays["isolation_remove"]
    assert any(t.endswith("isolation : Provider account (no shell, no password, no extra groups)")
               for t in result.changed_tasks), result.changed_tasks
    assert life.probes["provider_account_after_drift"] == life.probes["provider_user"]


@on_full_suite_only
def test_docker_members_reported_then_removed_only_when_told(life: Lifecycle) -> None:
    assert "alice is in the docker group" in life.plays["converge"].output
    assert life.probes["docker_group_converged"].endswith(":alice"), "reported, not removed by default"
    assert life.plays["isolation_remove"].rc == 0
    assert life.probes["docker_group_after_removal"].endswith(":"), life.probes["docker_group_after_removal"]


# ---- hostcheck selftest ------------------------------------------------------------------------

@on_full_suite_only
def test_selftest_refuses_beside_a_rentals_container(life: Lifecycle) -> None:
    """The refusal reads the running containers from the real Docker daemon; without the
    rental's container that reason is gone."""
    beside, without = life.probes["selftest_beside_rental"], life.probes["selftest_without_rental"]
    assert beside.rc == 3, beside.stderr[-2000:]
    reasons = json.loads(beside.stdout)["refused"]
    assert any(r.startswith(f"a rental or provider container is running ({RENTAL_CONTAINER} (labpy))")
               for r in reasons), reasons
    assert "a rental or provider container" not in without.stdout, without.stdout[-2000:]


@on_full_suite_only
def test_selftest_reports_dockers_own_error_when_a_gpu_container_cannot_start(life: Lifecycle) -> None:
    """--in-container through the real daemon, which has no NVIDIA runtime here: `--gpus all`
    fails as it would for a renter, and the answer carries Docker's own words."""
    run = json.loads(life.probes["selftest_without_rental"].stdout)
    container = run["preflight"]["container"]
    assert container["image"] == "labpy" and container["started"] is False, container
    assert "could not select device driver" in container["error"], container


@on_full_suite_only
def test_selftest_runs_its_stages_inside_a_gpu_container(life: Lifecycle) -> None:
    """--in-container through the real daemon's `--gpus all` path (its NVIDIA hook a stand-in
    that mounts no driver): the container starts, the worker runs in it on the image's python3
    with only hostcheck and nvidia-ml-py mounted, says the driver is missing there, and the
    container is gone afterwards."""
    result = life.probes["selftest_in_container"]
    run = json.loads(result.stdout)
    assert run["preflight"]["container"] == {"image": "labpy", "started": True, "error": ""}, result.stderr[-2000:]
    assert run["error"].startswith("in the container, cannot load libcuda.so.1"), run["error"]
    assert result.rc == 3 and not run["answer"]["passed"]
    assert life.probes["selftest_containers_left"] == ""


# ---- provider: never auto-enabled -------------------------------------------------------------

def test_provider_staged_root_only_never_installed(life: Lifecycle) -> None:
    stage = life.probes["provider_stage"]
    assert "/opt/hostcheck-provider 700 root" in stage
    assert "/opt/hostcheck-provider/vast/install.sh 700 root" in stage
    script = life.probes["install_script"]
    assert "wget -q https://console.vast.ai/install -O install" in script
    assert '--no-driver --ports 40000 40199' in script
    for unit in AGENT_UNITS:
        assert life.probes["units"][unit] == ("not-found", "inactive"), unit


@on_full_suite_only
def test_provider_enable_without_acknowledgement_refused(life: Lifecycle) -> None:
    result = life.plays["enable_no_ack"]
    assert result.rc != 0
    assert "does not hold the exact sentence" in flat(result.output), result.tail()


@on_full_suite_only
def test_provider_enable_without_opt_in_refused(life: Lifecycle) -> None:
    result = life.plays["enable_not_enabled"]
    assert result.rc != 0
    assert "provider_enable is not true" in result.output


@on_full_suite_only
def test_provider_enable_refused_while_the_audit_shows_blockers(life: Lifecycle) -> None:
    """With the flag and the exact sentence, the real `hostcheck audit --policy vast` still
    finds blockers on this GPU-less host (exit 3), and the gate stops there."""
    result = life.plays["enable_audit_blocks"]
    assert result.rc != 0
    assert "reports blockers" in flat(result.output), result.tail()


@on_full_suite_only
def test_agent_neither_installed_nor_running_after_the_gate(life: Lifecycle) -> None:
    for unit in AGENT_UNITS:
        assert life.probes["units_after_gate"][unit] == ("not-found", "inactive"), unit
    assert "installed" not in life.probes["installed_marker"].split()
    assert "provider-enabled-vast.json" not in life.probes["installed_marker"]
    assert "40000-40199" not in life.probes["ruleset_after_gate"]


# ---- manifest ---------------------------------------------------------------------------------

def test_manifest_is_root_only(life: Lifecycle) -> None:
    assert life.probes["manifest_perms"][:2] == ["700 root root", "600 root root"]


def test_manifest_recorded_every_change(life: Lifecycle) -> None:
    entries = life.manifest["entries"]
    by_role: dict[str, set[str]] = {}
    for e in entries:
        by_role.setdefault(e["role"], set()).add(f"{e['kind']}:{e['key']}")
    assert "file:/etc/ssh/sshd_config.d/01-hostcheck.conf" in by_role["ssh_hardening"]
    assert "file:/etc/hostcheck/firewall.nft" in by_role["firewall"]
    assert "unit:hostcheck-firewall.service" in by_role["firewall"]
    # one entry for the engine install: docker.io (Debian 13: with docker-cli, which holds the client)
    engine = [k for k in by_role["docker_host"] if k.startswith("packages:") and "docker.io" in k[9:].split(",")]
    assert len(engine) == 1, by_role["docker_host"]
    assert {"user:gpuprovider", "group:gpuprovider"} <= by_role["isolation"]
    assert "unit:sleep.target" in by_role["host_baseline"]
    assert "hold:kmod" in by_role["host_baseline"]
    docker = next(e for e in entries if e["kind"] == "packages" and "docker.io" in e["key"].split(","))
    assert docker["finalized"] and "docker.io" in docker["added"]


# ---- rollback ---------------------------------------------------------------------------------

@on_full_suite_only
def test_rollback_refuses_to_drop_containers(life: Lifecycle) -> None:
    """A rollback purges the engine; containers are the operator's, so it stops first, before
    any role has undone anything."""
    result = life.plays["rollback_with_container"]
    assert result.rc != 0 and "container(s) still exist" in flat(result.output)
    assert life.probes["manifest_after_refusal"] == life.probes["manifest_before_refusal"]


def test_rollback_check_mode_changes_nothing(life: Lifecycle) -> None:
    result = life.plays["rollback_check"]
    assert result.rc == 0, result.describe()
    assert result.stats(life.host.name)["changed"] > 0
    before, after = life.snaps["before_rollback"], life.snaps["after_rollback_check"]
    assert play.file_diff(before, after, ignore=IDLE_NOISE) == {}
    assert before.packages == after.packages


def test_rollback_restores_every_path(life: Lifecycle) -> None:
    """Content, mode and owner of everything under /etc and /var/lib equal the pre-profile
    snapshot; only the package manager's own bookkeeping differs."""
    result = life.plays["rollback"]
    assert result.rc == 0, result.describe()
    diff = play.file_diff(life.snaps["before"], life.snaps["rolled_back"], ignore=IDLE_NOISE + PACKAGE_MANAGER_STATE)
    assert diff == {}


def test_rollback_removes_packages_users_units_and_holds(life: Lifecycle) -> None:
    before, after = life.snaps["before"], life.snaps["rolled_back"]
    assert before.packages == after.packages, {
        "added": sorted(set(after.packages) - set(before.packages)),
        "removed": sorted(set(before.packages) - set(after.packages))}
    assert before.users == after.users
    assert before.groups == after.groups, "docker group with alice back in it, gpuprovider gone"
    assert before.holds == after.holds
    rebooted = tuple(life.probes.get("first_boot_units", ()))
    assert play.unit_diff(before, after, ignore_active=IDLE_UNITS + REACHED_TARGETS + rebooted) == {}
    assert life.probes["tables_after_rollback"] == life.probes["tables_before"], "ufw's tables stay, Docker's go"
    assert life.probes["manifest_dir_after_rollback"] == "gone"


def test_rollback_restores_the_runtime_network_state(life: Lifecycle) -> None:
    """Sysctls, both firewall backends' rules (ufw's chains back, Docker's gone from ufw's
    tables), bridges, links, addresses and routes equal the host before the profile. Loaded
    modules belong to the machine's shared kernel and are left out."""
    diff = play.runtime_diff(life.probes["runtime_before"], life.probes["runtime_after_rollback"], skip=("modules",))
    assert diff == {}, diff


def test_rollback_restores_password_login(life: Lifecycle) -> None:
    """Back to the pre-profile state, cloud-init's choice included (that is what rollback means)."""
    assert life.probes["password_login_after_rollback"].rc == 0


@on_full_suite_only
def test_rollback_is_idempotent(life: Lifecycle) -> None:
    result = life.plays["rollback_again"]
    assert result.rc == 0, result.describe()
    assert result.stats(life.host.name)["changed"] == 0, result.changed_tasks


# ---- the collection, called the way an operator calls it ------------------------------------------

@on_full_suite_only
def test_the_lifecycle_ran_the_installed_collection(life: Lifecycle) -> None:
    """On Debian 12 the dry run, converge, rerun and rollback above came from the installed
    tarball, by the roles' full names (a role from the clone prints without the prefix)."""
    for name in ("check", "converge", "rerun"):
        output = life.plays[name].output
        for role in ("host_baseline", "ssh_hardening", "firewall", "docker_host", "isolation", "provider_vast"):
            assert f"TASK [{collection.FQCN}.{role} : " in output, (name, role)
        assert "TASK [host_baseline : " not in output, name
    assert life.plays["rollback"].argv[3] == f"{collection.FQCN}.rollback"
    assert f"TASK [{collection.FQCN}.rollback_manifest : " in life.plays["rollback"].output


# ---- the audit's view ---------------------------------------------------------------------------

CLEARED_BY_PROFILE = ("NET-1010", "SSH-1010", "DOC-1020", "DOC-1030", "DOC-1040", "DOC-1050", "PKG-1010")


def test_audit_findings_cleared_by_the_profile(life: Lifecycle) -> None:
    """`hostcheck audit --policy dedicated-host` before, after and after rollback."""
    before, after = life.audits["before"], life.audits["converged"]
    still_failing = {i: after[i] for i in CLEARED_BY_PROFILE if after.get(i) != "pass"}
    assert still_failing == {}, {"before": {i: before.get(i) for i in CLEARED_BY_PROFILE}, "after": after}
    assert before["SSH-1010"] == "fail"


def test_audit_after_rollback_matches_the_first_report(life: Lifecycle) -> None:
    assert life.audits["rolled_back"] == life.audits["before"]
