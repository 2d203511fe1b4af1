"""Helpers for the host-profile tests: run real ansible-playbook against lab hosts, and take
snapshots of a host's state (files, units, packages, accounts) to compare before and after.

Shared by tests/lanes/profile/test_*.py and bench/profile.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from tests.lab.steps import Steps

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = REPO / ".venv" / "bin"
PLAYBOOKS = REPO / "playbooks"

# The acknowledgement sentence, as the provider roles define it (roles/provider_*/vars).
ACKNOWLEDGEMENT = "I understand that strangers' workloads will run on this machine and I accept the risk"

# Docker's engine runs in the nspawn lane once the container gets a cgroup2-only hierarchy
# (runc needs writable cgroups), the keyring syscalls (runc joins a session keyring) and BPF
# (runc's cgroup2 device filter). Nothing here changes the machine: these are the container's
# own seccomp filter, capability set and cgroup view.
BASELINE_PROVEN_ELSEWHERE = {
    "host_baseline_time_sync": False, "host_baseline_hardening": False, "host_baseline_journald": False,
    "host_baseline_security_updates": False, "host_baseline_logind_ignore_lid": False,
    "host_baseline_disable_core_dumps": False, "host_baseline_smartmontools": False,
    "host_baseline_local_isolation": False,
}
"""host_baseline's parts left off by the lanes that are about something else (container egress,
the fleet, the kernel in the VM): a host's own settings that the profile lifecycle converges, reruns
and rolls back on Debian 12 and 13, and tests/lanes/profile/test_local_isolation.py the homes. A
converge of host_baseline is ~40 % of site.yml's task time."""

DOCKER_NSPAWN_ARGS = (
    "--system-call-filter=add_key keyctl request_key bpf",
    "--capability=CAP_BPF",
)
DOCKER_NSPAWN_ENV = {"SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1"}

RECAP_RE = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.M,
)
TASK_RE = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(?P<name>.*?)\] \*+$")
CHANGED_RE = re.compile(r"^changed: \[(?P<host>[^\]]+)\]")


@dataclass
class PlayResult:
    playbook: str
    argv: list[str]
    rc: int
    output: str
    seconds: float
    recap: dict[str, dict[str, int]] = field(default_factory=dict)
    changed_tasks: list[str] = field(default_factory=list)

    def stats(self, host: str) -> dict[str, int]:
        assert host in self.recap, f"{host} not in the play recap of {self.playbook}:\n{self.tail()}"
        return self.recap[host]

    def tail(self, lines: int = 80) -> str:
        return "\n".join(self.output.splitlines()[-lines:])

    def describe(self) -> str:
        return f"{' '.join(self.argv)} -> rc={self.rc} in {self.seconds:.1f}s\n{self.tail()}"


def ansible_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "PATH": f"{VENV_BIN}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}",
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_STDOUT_CALLBACK": "default",
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml",
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_LOCAL_TEMP": tempfile.gettempdir() + "/hostcheck-ansible-local",
        # SSH connect and become-prompt wait (default 10 s): sudo in a TCG VM on a busy 2-core
        # machine took over 12 s. A test that wants a short one sets ansible_ssh_timeout.
        "ANSIBLE_TIMEOUT": env.get("ANSIBLE_TIMEOUT", "60"),
    })
    if extra:
        env.update(extra)
    return env


def project_env(project: Path) -> dict[str, str]:
    """:func:`ansible_env` for an operator's own Ansible directory: its ansible.cfg, and nothing
    of this repository's Ansible settings left in the environment."""
    env = {k: v for k, v in ansible_env().items()
           if not k.startswith(("ANSIBLE_ROLES", "ANSIBLE_LIBRARY", "ANSIBLE_MODULE_UTILS", "ANSIBLE_COLLECTIONS",
                                "ANSIBLE_ACTION_PLUGINS"))}
    env["ANSIBLE_CONFIG"] = str(project / "ansible.cfg")
    return env


def run_playbook(inventory: Path | str, playbook: str | Path, *, extra_vars: dict[str, Any] | None = None,
                 check: bool = False, diff: bool = False, timeout: float = 900,
                 args: list[str] | None = None, project: Path | None = None) -> PlayResult:
    """ansible-playbook from the repository root (ansible.cfg applies), or from ``project``, an
    operator's own Ansible directory with its own ansible.cfg (the playbook is then taken as
    written: a path in that directory or a collection playbook's full name); never raises on a
    failed play: the caller asserts on rc, recap and output."""
    path = Path(playbook)
    if project is not None:
        target = str(playbook)
    else:
        if not path.is_absolute():
            path = PLAYBOOKS / path if (PLAYBOOKS / path).exists() else REPO / path
        target = str(path)
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), target]
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars)]
    if check:
        argv.append("--check")
    if diff:
        argv.append("--diff")
    argv += args or []
    started = time.monotonic()
    try:
        env = ansible_env() if project is None else project_env(project)
        proc = subprocess.run(argv, cwd=project or REPO, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        # the partial output comes back as bytes even with text=True
        parts = [p.decode(errors="replace") if isinstance(p, bytes) else (p or "") for p in (exc.stdout, exc.stderr)]
        rc, output = 124, f"{parts[0]}{parts[1]}\n[timed out after {timeout}s]"
    result = PlayResult(path.name, argv, rc, output, time.monotonic() - started)
    for match in RECAP_RE.finditer(output):
        result.recap[match["host"]] = {k: int(v) for k, v in match.groupdict().items() if k != "host"}
    task = ""
    for line in output.splitlines():
        if m := TASK_RE.match(line):
            task = m["name"]
        elif CHANGED_RE.match(line):
            result.changed_tasks.append(task)
    return result


def playbook_step(steps: Steps, name: str, budget: float, inventory: Path | str, playbook: str | Path,
                  **kwargs: Any) -> PlayResult:
    """:func:`run_playbook` as a budgeted set-up step: the playbook is killed at ``budget``
    seconds and :class:`tests.lab.steps.StepOverBudget` then names the step, the time and the
    play's last output lines. A play that fails in time is returned (the caller asserts)."""
    result = run_playbook(inventory, playbook, timeout=budget, **kwargs)
    steps.record(name, result.seconds, budget)
    if result.rc == 124 and result.output.endswith(f"[timed out after {budget}s]"):
        raise steps.over_budget(name, result.seconds, budget, lambda: result.output,
                                f" ({result.playbook})")
    return result


def write_playbook(folder: Path, name: str, roles: list[str], *, vars_: dict[str, Any] | None = None) -> Path:
    """A throwaway playbook applying only some roles (e.g. the firewall alone)."""
    path = folder / name
    play = {"name": f"Apply {', '.join(roles)}", "hosts": "all", "become": True, "roles": roles}
    if vars_:
        play["vars"] = vars_
    path.write_text(json.dumps([play], indent=1))
    return path


@contextmanager
def docker_capable_env() -> Iterator[None]:
    """While lab hosts start: the cgroup2-only view runc needs (read by systemd-nspawn from its
    environment, which the lab passes through)."""
    with mock.patch.dict(os.environ, DOCKER_NSPAWN_ENV):
        yield


# ---- snapshots of a host ---------------------------------------------------------------------

SNAPSHOT_SCRIPT = r"""
import hashlib, json, os, stat, subprocess, sys
roots = sys.argv[1:]
files = {}
for root in roots:
    dev = os.lstat(root).st_dev
    for dirpath, dirnames, filenames in os.walk(root):
        keep = []
        for d in dirnames:
            p = os.path.join(dirpath, d)
            st = os.lstat(p)
            if st.st_dev != dev:
                files[p] = ["mountpoint"]
                continue
            if stat.S_ISLNK(st.st_mode):
                filenames.append(d)
                continue
            keep.append(d)
        dirnames[:] = keep
        st = os.lstat(dirpath)
        files[dirpath] = ["dir", "%o" % stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid]
        for f in filenames:
            p = os.path.join(dirpath, f)
            st = os.lstat(p)
            meta = ["%o" % stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid]
            if stat.S_ISLNK(st.st_mode):
                files[p] = ["link", os.readlink(p)] + meta
            elif stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                try:
                    with open(p, "rb") as fh:
                        for chunk in iter(lambda: fh.read(1 << 20), b""):
                            h.update(chunk)
                    files[p] = ["file", h.hexdigest()] + meta
                except OSError as exc:
                    files[p] = ["unreadable", str(exc)] + meta
            else:
                files[p] = ["special"] + meta
def out(argv):
    return subprocess.run(argv, capture_output=True, text=True).stdout
units = {}
for line in out(["systemctl", "list-unit-files", "--no-legend", "--no-pager"]).splitlines():
    parts = line.split()
    if len(parts) >= 2:
        units[parts[0]] = {"file": parts[1]}
for line in out(["systemctl", "list-units", "--all", "--no-legend", "--no-pager", "--plain"]).splitlines():
    parts = line.split()
    if len(parts) >= 4:
        units.setdefault(parts[0], {})["active"] = parts[2]
packages = {}
for line in out(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n"]).splitlines():
    name, version, status = line.split("\t")
    packages[name] = [version, status.strip()]
print(json.dumps({
    "files": files, "units": units, "packages": packages,
    "users": sorted(l.split(":")[0] for l in out(["getent", "passwd"]).splitlines()),
    "groups": {l.split(":")[0]: l.split(":")[3] for l in out(["getent", "group"]).splitlines()},
    "holds": sorted(out(["apt-mark", "showhold"]).split()),
}))
"""


@dataclass
class Snapshot:
    files: dict[str, list[Any]]
    units: dict[str, dict[str, str]]
    packages: dict[str, list[str]]
    users: list[str]
    groups: dict[str, str]
    holds: list[str]


def snapshot(host: Any, roots: tuple[str, ...] = ("/etc", "/var/lib")) -> Snapshot:
    result = host.sudo(f"python3 - {' '.join(roots)} <<'EOF'\n{SNAPSHOT_SCRIPT}\nEOF", timeout=120)
    assert result.rc == 0, f"snapshot failed: {result.stderr}"
    return Snapshot(**json.loads(result.stdout))


def file_diff(before: Snapshot, after: Snapshot, *, ignore: tuple[str, ...] = ()) -> dict[str, tuple[Any, Any]]:
    """Paths whose type, content, mode or owner differ (or that appeared/disappeared), except
    those under an ignored prefix."""
    def ignored(path: str) -> bool:
        return any(path == p or path.startswith(p.rstrip("/") + "/") for p in ignore)
    diff: dict[str, tuple[Any, Any]] = {}
    for path in sorted(set(before.files) | set(after.files)):
        if ignored(path):
            continue
        if before.files.get(path) != after.files.get(path):
            diff[path] = (before.files.get(path), after.files.get(path))
    return diff


# ---- runtime state: what a reboot would reset, and so what a file snapshot cannot see -------

RUNTIME_SCRIPT = r"""
import glob, json, os, re, subprocess, time
# A container's veth comes and goes with it: Docker's state, not the profile's.
def ours(name):
    return not name.startswith("veth")
def out(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "not run: %s" % exc
def read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None
# IPv6 addresses still in duplicate address detection are a moment's state: wait it out
for _ in range(50):
    if not out(["ip", "-6", "addr", "show", "tentative"]).strip():
        break
    time.sleep(0.2)
sysctls = {}
for family in ("ipv4", "ipv6"):
    for path in glob.glob("/proc/sys/net/%s/conf/*/*" % family):
        iface = path.split("/")[6]
        value = read(path)
        if ours(iface) and value is not None:
            sysctls[path[len("/proc/sys/"):].replace("/", ".")] = value
for path in ["/proc/sys/net/ipv4/ip_forward"] + glob.glob("/proc/sys/net/bridge/*"):
    value = read(path)
    if value is not None:
        sysctls[path[len("/proc/sys/"):].replace("/", ".")] = value
counters = re.compile(r"counter packets \d+ bytes \d+|\[\d+:\d+\]")
def rules(argv):
    text = out(argv)
    return [counters.sub("counter", l) for l in text.splitlines() if l.strip() and not l.startswith("#")]
firewall = {"nft": rules(["nft", "list", "ruleset"])}
for tool in ("iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"):
    firewall[tool] = rules([tool])
bridges = {}
for path in glob.glob("/sys/class/net/*/bridge/*"):
    name = os.path.basename(path)
    if not name.endswith("timer"):
        bridges[path[len("/sys/class/net/"):]] = read(path)
lifetimes = re.compile(r"\s*(valid|preferred)_lft \S+")
def lines(argv):
    return sorted(lifetimes.sub("", l).replace(" linkdown", "") for l in out(argv).splitlines() if "veth" not in l)
print(json.dumps({
    "sysctls": sysctls, "firewall": firewall, "bridges": bridges,
    "links": sorted(n for n in os.listdir("/sys/class/net") if ours(n)),
    "addresses": lines(["ip", "-o", "addr", "show"]),
    "routes": lines(["ip", "-4", "route", "show", "table", "all"]) + lines(["ip", "-6", "route", "show", "table", "all"]),
    "modules": sorted(l.split()[0] for l in (read("/proc/modules") or "").splitlines()),
}))
"""


def runtime_snapshot(host: Any) -> dict[str, Any]:
    """The host's runtime network state: every interface's IPv4 and IPv6 sysctls (container
    veths aside), ip_forward and net.bridge.*, both firewall backends' rules (nft and
    iptables-nft, iptables-legacy; counters blanked), bridge settings, links, addresses,
    routes, loaded modules."""
    result = host.sudo(f"python3 - <<'EOF'\n{RUNTIME_SCRIPT}\nEOF", timeout=120)
    assert result.rc == 0, f"runtime snapshot failed: {result.stderr}"
    state: dict[str, Any] = json.loads(result.stdout)
    return state


def _changed(old: Any, new: Any) -> Any:
    if isinstance(old, list) and isinstance(new, list):
        gone, added = [x for x in old if x not in new], [x for x in new if x not in old]
        if gone or added:
            return {"gone": gone, "new": added}
        moved = [i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b]
        return {"reordered": [f"{i}: {old[i]!r} -> {new[i]!r}" for i in moved[:30]]}
    return (old, new)


def runtime_diff(before: dict[str, Any], after: dict[str, Any], *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Per part of the runtime snapshot: the keys (or lines) that differ, before -> after."""
    diff: dict[str, Any] = {}
    for part in sorted(set(before) | set(after)):
        if part in skip:
            continue
        old, new = before.get(part), after.get(part)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            diff[part] = {k: _changed(old.get(k), new.get(k)) for k in sorted(set(old) | set(new))
                          if old.get(k) != new.get(k)}
        else:
            diff[part] = _changed(old, new)
    return diff


# The test's own SSH logins: each is a session scope under the admin's user manager.
# (systemd 257, Debian 13, names a session without an audit id "c<N>").
SESSION_UNITS = re.compile(r"^(session-c?\d+\.scope|run-user-\d+\.mount|user@\d+\.service|user-\d+\.slice|user-runtime-dir@\d+\.service)$")


def unit_diff(before: Snapshot, after: Snapshot, *, ignore_active: tuple[str, ...] = ()) -> dict[str, tuple[Any, Any]]:
    diff: dict[str, tuple[Any, Any]] = {}
    for unit in sorted(set(before.units) | set(after.units)):
        if SESSION_UNITS.match(unit):
            continue
        b, a = dict(before.units.get(unit, {})), dict(after.units.get(unit, {}))
        if unit in ignore_active:
            b.pop("active", None)
            a.pop("active", None)
        if b != a:
            diff[unit] = (before.units.get(unit), after.units.get(unit))
    return diff


@dataclass
class Lockout:
    """A host shut out by an unconfirmed firewall change, and what it had before."""

    firewall_playbook: Path
    table: str
    config: str
    started: float
    result: PlayResult


def firewall_lockout(host: Any, folder: Path, deadman_seconds: int) -> Lockout:
    """Apply a good firewall, then one that admits only 192.0.2.0/24: the run loses the host,
    so the new ruleset is never confirmed and the dead-man timer (``deadman_seconds``) is armed."""
    firewall_only = write_playbook(folder, "firewall.yml", ["firewall"])
    good = run_playbook(host.inventory_path, firewall_only)
    assert good.rc == 0, good.describe()
    table = host.sudo("nft list table inet hostcheck").stdout
    config = host.sudo("cat /etc/hostcheck/firewall.nft").stdout
    assert "policy drop" in table
    started = time.monotonic()
    bad = run_playbook(host.inventory_path, firewall_only,
                       extra_vars={"firewall_admin_ranges": ["192.0.2.0/24"],
                                   "firewall_deadman_seconds": deadman_seconds, "ansible_ssh_timeout": 5})
    assert bad.rc != 0 and bad.stats(host.name)["unreachable"] == 1, bad.describe()
    host.close_ssh_masters()
    assert host.run("true", timeout=8).rc != 0, "the bad ruleset must really shut SSH out"
    return Lockout(firewall_only, table, config, started, bad)


def start_playbook(inventory: Path | str, playbook: str | Path, *, extra_vars: dict[str, Any] | None = None,
                   log: Path) -> subprocess.Popen[bytes]:
    """ansible-playbook in the background (its own process group, output to ``log``), for
    tests that interrupt a run."""
    path = Path(playbook)
    if not path.is_absolute():
        path = PLAYBOOKS / path
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(path)]
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars)]
    return subprocess.Popen(argv, cwd=REPO, env=ansible_env(), stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def manifest_entries(host: Any) -> list[dict[str, Any]]:
    result = host.sudo("cat /var/lib/hostcheck-profile/manifest.json 2>/dev/null")
    return json.loads(result.stdout)["entries"] if result.rc == 0 and result.stdout.strip() else []
