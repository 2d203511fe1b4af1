#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hostcheck contributors
# Apache-2.0
"""Record-before-change manifest for the hostcheck host profile, and its reverse replay."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hostcheck_manifest
short_description: Record what the host profile is about to change, and undo it
description:
  - Before a role changes anything it calls this module to record the original state of what
    it is about to touch (file content or absence, mode and owner; packages that were absent;
    users and groups that did not exist; unit enablement; runtime sysctl values, also for
    interfaces created later; iptables rules that did not exist; dpkg selections; group
    memberships) in a root-only JSON manifest on the host.
  - Only the first record of a thing counts, so re-runs keep the pre-profile state.
  - Every record is written to disk before the module returns, so a run interrupted halfway
    can still be rolled back.
  - C(action=rollback) replays one role's entries in reverse order and drops each entry once
    it has been undone, so an interrupted rollback can be resumed.
options:
  action:
    description: What to do.
    type: str
    choices: [record, finalize_packages, rollback, status, cleanup]
    default: record
  role:
    description: Role the entries belong to (required except for status and cleanup).
    type: str
  path:
    description: Manifest file (the roles pass C(rollback_manifest_path)).
    type: path
    required: true
  files:
    description: Files, links or directories whose current state (or absence) is recorded.
    type: list
    elements: path
    default: []
  trees:
    description:
      - Directories owned entirely by the profile. When absent before, rollback removes them
        with everything inside; for I(files) entries a directory is only removed when empty.
    type: list
    elements: path
    default: []
  packages:
    description:
      - Packages about to be installed. The absent ones are recorded together with a snapshot
        of installed packages, users and groups; call C(finalize_packages) after installing so
        rollback purges exactly what the install added (dependencies and package-created
        accounts included).
    type: list
    elements: str
    default: []
  units:
    description: systemd units whose enablement and activity are recorded.
    type: list
    elements: str
    default: []
  read_units:
    description: systemd units whose enablement and activity are only read (returned in
      C(units_now) with I(units)), not recorded.
    type: list
    elements: str
    default: []
  users:
    description: Accounts about to be created; only absent ones are recorded.
    type: list
    elements: str
    default: []
  groups:
    description: Groups about to be created; only absent ones are recorded.
    type: list
    elements: str
    default: []
  group_members:
    description: C(group:user) memberships about to be removed; present ones are recorded.
    type: list
    elements: str
    default: []
  sysctls:
    description: Runtime sysctl keys whose current value is recorded.
    type: list
    elements: str
    default: []
  nft_tables:
    description:
      - nftables tables (C(family name), e.g. C(ip nat)) whose absence is recorded; rollback
        deletes those that did not exist and exist now (Docker's iptables-nft tables outlive
        the purged engine until the next boot). Of an iptables-nft table that exists already
        (ufw's C(ip filter)) its chains, policies and rules are recorded; rollback removes the
        chains and rules added since and sets changed policies back.
    type: list
    elements: str
    default: []
  iptables_rules:
    description:
      - IPv4 iptables rules as C(table chain rule-spec...) (e.g. C(nat POSTROUTING -o docker0 -m
        addrtype --src-type LOCAL -j MASQUERADE)) whose absence is recorded; rollback deletes
        those that did not exist and exist now (rules a daemon adds for a setting the profile
        chose and does not take back when the setting is undone).
    type: list
    elements: str
    default: []
  sysctl_defaults:
    description:
      - Per-interface runtime sysctls for every interface matching a pattern, including those
        created after the record (a daemon the profile configures may create interfaces and set
        the sysctl on them). The value of each matching interface present now is recorded as a
        I(sysctls) entry would be; rollback sets every other matching interface present then to
        I(value).
    type: list
    elements: dict
    default: []
    suboptions:
      key:
        description: The sysctl key with C({interface}) where the interface name goes, e.g. C(net.ipv4.conf.{interface}.route_localnet).
        type: str
        required: true
      interfaces:
        description: Regular expression (full match) of the interface names it applies to.
        type: str
        required: true
      bridges:
        description: Every bridge present counts as matching too, whatever its name (Docker names a network's bridge after its C(com.docker.network.bridge.name) option when it has one).
        type: bool
        default: false
      value:
        description: What an interface that did not exist at the record gets on rollback.
        type: str
        required: true
  iptables_rule_defaults:
    description:
      - IPv4 iptables rules naming an interface, for every interface matching a pattern,
        including those created after the record. The absence of the rule for each matching
        interface present now is recorded as an I(iptables_rules) entry would be; rollback
        deletes the rule for every other matching interface (present then, or named in the
        chain's rules) unless I(present) is true.
    type: list
    elements: dict
    default: []
    suboptions:
      rule:
        description: C(table chain rule-spec...) with C({interface}) where the interface name goes.
        type: str
        required: true
      interfaces:
        description: Regular expression (full match) of the interface names it applies to.
        type: str
        required: true
      bridges:
        description: Every bridge present counts as matching too, whatever its name (Docker names a network's bridge after its C(com.docker.network.bridge.name) option when it has one).
        type: bool
        default: false
      present:
        description: Whether the owner's own configuration would have the rule for an interface created later (it is then kept).
        type: bool
        default: false
  hold_patterns:
    description:
      - For C(action=record), regular expressions (full match) of package names. Installed
        packages that match and are not on hold are recorded and put on hold, after everything
        else this call records (rollback takes them off hold first).
    type: list
    elements: str
    default: []
  remove_empty:
    description: For C(action=cleanup), also remove the manifest directory when no entries remain.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
author: hostcheck contributors
"""

EXAMPLES = r"""
- name: Record the drop-in before writing it
  hostcheck_manifest:
    path: "{{ rollback_manifest_path }}"
    role: ssh_hardening
    files: [/etc/ssh/sshd_config.d/01-hostcheck.conf]

- name: Undo everything this role changed
  hostcheck_manifest:
    path: "{{ rollback_manifest_path }}"
    role: ssh_hardening
    action: rollback
"""

RETURN = r"""
hostcheck_files_now:
  description:
    - For record, a fact with the current state of each of I(files) and I(trees), as C(file
      SHA1 MODE OWNER GROUP), C(dir - MODE OWNER GROUP), C(absent) or C(other). The actions
      hostcheck_copy and hostcheck_directory compare it with what they would write and leave
      the host alone when they are equal.
  type: dict
  returned: when action is record and files or trees are given
units_now:
  description:
    - "For record, the enablement and activity of each of I(units) and I(read_units) now, as
      C({\"enabled\": ..., \"active\": ...}) (what C(systemctl is-enabled) and C(is-active) print;
      C(not-found) when it prints nothing), so a role needs no command of its own to read them."
  type: dict
  returned: when action is record
recorded:
  description: Entries recorded by this call (or, in check mode, that would be).
  type: list
  returned: always
undone:
  description: For rollback, what was undone (or would be, in check mode).
  type: list
  returned: always
kept:
  description: For rollback, what was deliberately left in place, with the reason.
  type: list
  returned: always
errors:
  description: For rollback, what could not be undone (those entries stay in the manifest).
  type: list
  returned: always
absent_packages:
  description: For record with I(packages), those not installed now (the caller installs them).
  type: list
  returned: always
packages_pending:
  description: For record with I(packages), whether C(finalize_packages) has an install to record (one
    about to happen, or one a run that was stopped left unrecorded); false, it may be left out.
  type: bool
  returned: always
held:
  description: For hold, the packages put on hold.
  type: list
  returned: always
entries:
  description: The number of entries left per role.
  type: dict
  returned: always
keys:
  description: The entries left per role, as C(kind:key) strings, oldest first.
  type: dict
  returned: always
"""


# Ansible substitutes this call's arguments as JSON for the marker below and pipes the file to
# the host's Python as it is. Without AnsiballZ there is no import of ansible.module_utils.basic,
# which ansible-core 2.19 compiles from source on every call (about 0.2 s of CPU on a small
# host, most of what a record costs), and no module_utils either: this file holds everything
# it needs, in three parts (the call, the manifest and the live state, the kinds of entry).
# <<INCLUDE_ANSIBLE_MODULE_JSON_ARGS>>

import base64
import errno
import fcntl
import grp
import hashlib
import json
import os
import pwd
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time

ARGS = "<<INCLUDE_ANSIBLE_MODULE_COMPLEX_ARGS>>"
TRUE_WORDS = {"true", "yes", "on", "1", "y"}
FALSE_WORDS = {"false", "no", "off", "0", "n"}
# Where AnsibleModule.get_bin_path also looks: sudo's secure_path may lack the sbin directories.
SBIN = ["/sbin", "/usr/sbin", "/usr/local/sbin"]


# ---------------------------------------------------------------------------------------------
# The call: arguments checked against the spec, commands run, one JSON document out. The part
# of AnsibleModule this module uses, with the same names, so the kinds read as before.

class ArgumentError(ValueError):
    pass


def _convert(name, value, kind):
    if kind in ("str", "path"):
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ArgumentError("%s must be a string, got %r" % (name, value))
        return str(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower()
        if word in TRUE_WORDS or word in FALSE_WORDS:
            return word in TRUE_WORDS
        raise ArgumentError("%s must be a boolean, got %r" % (name, value))
    if kind == "dict":
        if not isinstance(value, dict):
            raise ArgumentError("%s must be a dictionary, got %r" % (name, value))
        return value
    raise ArgumentError("unknown type %s for %s" % (kind, name))


def check_arguments(raw, spec, where="", required_if=()):
    """RAW checked against SPEC (AnsibleModule's argument_spec subset: type, elements, default,
    choices, required, options): unknown keys, wrong types and missing values are refused."""
    unknown = sorted(k for k in raw if k not in spec and not k.startswith("_ansible_"))
    if unknown:
        raise ArgumentError("unsupported parameters%s: %s" % (where, ", ".join(unknown)))
    params = {}
    for name, rule in spec.items():
        value = raw.get(name)
        if value is None:
            if rule.get("required"):
                raise ArgumentError("missing required argument%s: %s" % (where, name))
            params[name] = rule.get("default")
            continue
        kind = rule.get("type", "str")
        if kind == "list":
            if isinstance(value, str):
                value = [item.strip() for item in value.split(",") if item.strip()]
            if not isinstance(value, list):
                raise ArgumentError("%s must be a list, got %r" % (name, value))
            elements = rule.get("elements", "str")
            value = [_convert(name, item, elements) for item in value]
            if rule.get("options"):
                value = [check_arguments(item, rule["options"], " in %s" % name) for item in value]
        else:
            value = _convert(name, value, kind)
        if rule.get("choices") and value not in rule["choices"]:
            raise ArgumentError("%s must be one of %s, got %r" % (name, ", ".join(rule["choices"]), value))
        params[name] = value
    for key, value, needed in required_if:
        missing = [n for n in needed if params.get(n) is None]
        if params.get(key) == value and missing:
            raise ArgumentError("%s is %s but these are missing: %s" % (key, value, ", ".join(missing)))
    return params


class AnsibleModule:
    """What the kinds call: params, check_mode, run_command, get_bin_path, exit_json, fail_json."""

    def __init__(self, argument_spec, required_if=(), supports_check_mode=True):
        raw = json.loads(ARGS)
        self.check_mode = bool(raw.get("_ansible_check_mode")) and supports_check_mode
        # Parsed outputs (dpkg-query, systemctl, nft) are read in the C locale's words.
        os.environ["LC_ALL"] = "C.UTF-8"
        try:
            self.params = check_arguments(raw, argument_spec, required_if=required_if)
        except ArgumentError as exc:
            self.fail_json(msg=str(exc))

    def run_command(self, args, environ_update=None):
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            self.fail_json(msg="cannot run %r: a program was not found" % (args,))
        env = dict(os.environ, **(environ_update or {}))
        try:
            done = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, env=env, check=False)
        except OSError as exc:
            self.fail_json(msg="%s: %s" % (args[0], exc.strerror or exc), cmd=args, rc=exc.errno)
        return (done.returncode, done.stdout.decode("utf-8", "surrogateescape"),
                done.stderr.decode("utf-8", "surrogateescape"))

    def get_bin_path(self, name):
        path = os.pathsep.join([os.environ.get("PATH", "")] + SBIN)
        return shutil.which(name, path=path)

    def exit_json(self, **result):
        print(json.dumps(result))
        sys.exit(0)

    def fail_json(self, msg, **result):
        result.update(failed=True, msg=msg)
        print(json.dumps(result))
        sys.exit(1)


# ---------------------------------------------------------------------------------------------
# The manifest document on disk and read-only snapshots of the live system.

# Files bigger than this are config files no role of the profile touches; refusing them keeps
# the manifest small and avoids silently truncating anything.
MAX_FILE_BYTES = 4 * 1024 * 1024
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}


def utc_now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Manifest:
    """The JSON document on disk: a version and an ordered list of entries."""

    def __init__(self, path):
        self.path = path
        self.data = {"version": 1, "created": None, "next_seq": 1, "entries": []}
        self._lock_fd = None

    def load(self):
        try:
            with open(self.path, "r", encoding="utf-8") as handle:
                self.data = json.load(handle)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
        return self

    def lock(self):
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            return
        self._lock_fd = os.open(os.path.join(directory, ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)

    def unlock(self):
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def save(self):
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o700)
        os.chmod(directory, 0o700)
        if self.data.get("created") is None:
            self.data["created"] = utc_now()
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".manifest.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self.data, handle, indent=1, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o600)
            os.rename(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @property
    def entries(self):
        return self.data["entries"]

    def add(self, entry):
        entry["seq"] = self.data["next_seq"]
        entry["at"] = utc_now()
        self.data["next_seq"] += 1
        self.entries.append(entry)

    def find(self, kind, key, role=None):
        for entry in self.entries:
            if entry["kind"] == kind and entry.get("key") == key and (role is None or entry["role"] == role):
                return entry
        return None


def file_summary(path):
    """"file SHA1 MODE OWNER GROUP", "dir - MODE OWNER GROUP", "absent" or "other" (a link, a
    special file, one too big to record, unreadable): what hostcheck_copy and
    hostcheck_directory compare with what they would write, to skip the host when equal."""
    try:
        state = file_state(path)
    except (OSError, ValueError):
        return "other"
    if not state["exists"]:
        return "absent"
    attrs = "%s %s %s" % (state["mode"], state["owner"], state["group"])
    if state["type"] == "dir":
        return "dir - " + attrs
    if state["type"] == "file":
        return "file %s %s" % (hashlib.sha1(base64.b64decode(state["content_b64"])).hexdigest(), attrs)
    return "other"


def file_state(path):
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return {"exists": False}
        raise
    state = {
        "exists": True,
        "mode": "%04o" % stat.S_IMODE(st.st_mode),
        "uid": st.st_uid,
        "gid": st.st_gid,
        "owner": _name(pwd.getpwuid, st.st_uid),
        "group": _name(grp.getgrgid, st.st_gid),
    }
    if stat.S_ISLNK(st.st_mode):
        state["type"] = "link"
        state["target"] = os.readlink(path)
    elif stat.S_ISDIR(st.st_mode):
        state["type"] = "dir"
    elif stat.S_ISREG(st.st_mode):
        if st.st_size > MAX_FILE_BYTES:
            raise ValueError("%s is %d bytes; the manifest only records files up to %d bytes"
                             % (path, st.st_size, MAX_FILE_BYTES))
        with open(path, "rb") as handle:
            state["content_b64"] = base64.b64encode(handle.read()).decode("ascii")
        state["type"] = "file"
    else:
        raise ValueError("%s is neither a file, a directory nor a symlink" % path)
    return state


def _name(getter, ident):
    try:
        return getter(ident)[0]
    except KeyError:
        return None


def resolve_id(getter, name, fallback):
    """The id of an account or group by name (it may have been recreated with another id)."""
    if name:
        try:
            return getter(name)[2]
        except KeyError:
            pass
    return fallback


def dpkg_status(module):
    """Package name -> (want, status) for every package dpkg knows about."""
    rc, out, err = module.run_command(
        ["dpkg-query", "-W", "-f", "${Package}\t${db:Status-Want}\t${db:Status-Status}\n"],
        environ_update=APT_ENV)
    if rc not in (0, 1):
        module.fail_json(msg="dpkg-query failed: %s" % err.strip())
    result = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            # Multi-arch packages appear once per architecture; any installed copy counts.
            name, want, status = parts
            if result.get(name, ("", ""))[1] != "installed":
                result[name] = (want, status)
    return result


def installed_packages(module):
    return sorted(n for n, (_w, s) in dpkg_status(module).items() if s == "installed")


def auto_installed(module):
    rc, out, _err = module.run_command(["apt-mark", "showauto"], environ_update=APT_ENV)
    return set(out.split()) if rc == 0 else set()


def user_names():
    return sorted(p.pw_name for p in pwd.getpwall())


def group_names():
    return sorted(g.gr_name for g in grp.getgrall())


def unit_states(units):
    """Each unit's enablement and activity as `systemctl is-enabled` and `is-active` print them
    (not-found and unknown when they print nothing), the calls side by side: each one mostly
    waits on systemd."""
    calls = {}
    for unit in dict.fromkeys(units):
        for question in ("is-enabled", "is-active"):
            try:
                calls[unit, question] = subprocess.Popen(
                    ["systemctl", question, unit], stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            except OSError:
                calls[unit, question] = None
    answers = {key: (proc.communicate()[0].decode("utf-8", "surrogateescape").strip() if proc else "")
               for key, proc in calls.items()}
    return {unit: {"enabled": answers[unit, "is-enabled"] or "not-found",
                   "active": answers[unit, "is-active"] or "unknown"}
            for unit in dict.fromkeys(units)}


def unit_state(unit):
    return unit_states([unit])[unit]


def sysctl_path(key):
    return "/proc/sys/" + key.replace(".", "/")


def sysctl_value(key):
    try:
        with open(sysctl_path(key), "r", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def nft_tables(module):
    """Existing tables as "family name" strings, or None when nft is unavailable."""
    rc, out, _err = module.run_command(["nft", "list", "tables"])
    if rc != 0:
        return None
    return {line[len("table "):].strip() for line in out.splitlines() if line.startswith("table ")}


def group_has_member(group, user):
    try:
        return user in grp.getgrnam(group).gr_mem
    except KeyError:
        return False


# ---------------------------------------------------------------------------------------------
# The kinds of entry.
# One class per kind of manifest entry: how its original state is recorded and how it is
# undone, side by side. The entry format on disk is the module's contract; a kind only ever adds
# entries whose "kind" is its NAME.

# shadow's tools (useradd, groupdel, gpasswd, and package scripts calling them) rewrite these
# backups on every account change. They are recorded with the first account-related entry so
# that rollback leaves them as they were, not as the last userdel left them.
ACCOUNT_BACKUPS = ["/etc/passwd-", "/etc/group-", "/etc/shadow-", "/etc/gshadow-"]


class Recording:
    """One record call: adds entries to the manifest and remembers what it added."""

    def __init__(self, module, manifest, role):
        self.module = module
        self.manifest = manifest
        self.role = role
        self.recorded = []

    def add(self, entry, touches_accounts=False):
        if touches_accounts:
            FileKind.record_paths(self, ACCOUNT_BACKUPS, tree=False)
        self.recorded.append({k: v for k, v in entry.items() if k != "content_b64"})
        self.manifest.add(entry)

    def entry(self, kind, key, **fields):
        return dict(kind=kind, key=key, role=self.role, **fields)


class Undo:
    """One rollback: what was undone, deliberately kept, or failed (and so stays recorded)."""

    def __init__(self, module):
        self.module = module
        self.check = module.check_mode
        self.undone = []
        self.kept = []
        self.errors = []

    def run(self, argv, what):
        if self.check:
            return True
        rc, _out, err = self.module.run_command(argv, environ_update=APT_ENV)
        if rc != 0:
            self.errors.append({"what": what, "why": "%s failed: %s" % (" ".join(argv), err.strip())})
            return False
        return True


class Kind:
    """record() adds entries for one module argument; undo() returns True when the entry is
    fully undone and can leave the manifest."""

    NAME = ""

    def record(self, rec, values):
        raise NotImplementedError

    def undo(self, ctx, entry):
        raise NotImplementedError


class AccountKind(Kind):
    """A group or a user the profile created (recorded only when it did not exist yet);
    rollback deletes it."""

    def __init__(self, name, existing, delete_command):
        self.NAME = name
        self.existing = existing
        self.delete_command = delete_command

    def record(self, rec, values):
        for name in values:
            if rec.manifest.find(self.NAME, name) is None and name not in self.existing():
                rec.add(rec.entry(self.NAME, name), touches_accounts=True)

    def undo(self, ctx, entry):
        if entry["key"] in self.existing():
            ctx.undone.append({self.NAME: entry["key"], "action": "delete"})
            return ctx.run([self.delete_command, entry["key"]], self.NAME + " " + entry["key"])
        return True


class FileKind(Kind):
    """Content (or absence), mode, owner, link target. A tree entry is a directory the profile
    owns entirely: when it was absent, rollback removes it with everything inside."""

    NAME = "file"

    def __init__(self, tree=False):
        self.tree = tree

    def record(self, rec, values):
        self.record_paths(rec, values, self.tree)

    @staticmethod
    def record_paths(rec, paths, tree):
        for path in paths:
            path = os.path.normpath(path)
            if rec.manifest.find(FileKind.NAME, path) is None:
                try:
                    state = file_state(path)
                except (OSError, ValueError) as exc:
                    rec.module.fail_json(msg="cannot record %s: %s" % (path, exc))
                rec.add(dict(kind=FileKind.NAME, key=path, role=rec.role, tree=tree, **state))

    def undo(self, ctx, entry):
        path = entry["key"]
        current = file_state(path) if os.path.lexists(path) else {"exists": False}
        if not entry["exists"]:
            return self._remove(ctx, entry, path, current)
        same = all(current.get(k) == entry.get(k) for k in ("type", "mode", "uid", "gid", "content_b64", "target"))
        if same:
            return True
        ctx.undone.append({"file": path, "action": "restore"})
        if not ctx.check:
            self._restore(entry, path, current)
        return True

    @staticmethod
    def _remove(ctx, entry, path, current):
        if not current["exists"]:
            return True
        if current["type"] == "dir" and not entry.get("tree") and os.listdir(path):
            ctx.kept.append({"what": path, "why": "directory created by the profile is not empty; "
                             "remove it by hand once its content is no longer needed"})
            return True
        ctx.undone.append({"file": path, "action": "remove"})
        if not ctx.check:
            if current["type"] == "dir":
                shutil.rmtree(path)
            else:
                os.unlink(path)
        return True

    @staticmethod
    def _restore(entry, path, current):
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent, 0o755)
        if entry["type"] == "dir":
            if current["exists"] and current["type"] != "dir":
                os.unlink(path)
            if not os.path.isdir(path):
                os.mkdir(path)
        elif entry["type"] == "link":
            if current["exists"]:
                if current["type"] == "dir":
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            os.symlink(entry["target"], path)
        else:
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=".hostcheck-restore.")
            with os.fdopen(fd, "wb") as handle:
                handle.write(base64.b64decode(entry["content_b64"]))
            if current["exists"] and current["type"] == "dir":
                shutil.rmtree(path)
            os.rename(tmp, path)
        uid = resolve_id(pwd.getpwnam, entry.get("owner"), entry["uid"])
        gid = resolve_id(grp.getgrnam, entry.get("group"), entry["gid"])
        os.lchown(path, uid, gid)
        if entry["type"] != "link":
            os.chmod(path, int(entry["mode"], 8))


class MemberKind(Kind):
    """A group:user membership about to be removed."""

    NAME = "member"

    def record(self, rec, values):
        for spec in values:
            if ":" not in spec:
                rec.module.fail_json(msg="group_members entries are group:user, got %r" % spec)
            group, user = spec.split(":", 1)
            if rec.manifest.find(self.NAME, spec) is None and group_has_member(group, user):
                rec.add(rec.entry(self.NAME, spec, group=group, user=user), touches_accounts=True)

    def undo(self, ctx, entry):
        if entry["group"] in group_names() and not group_has_member(entry["group"], entry["user"]):
            ctx.undone.append({"member": entry["key"], "action": "re-add"})
            return ctx.run(["gpasswd", "-a", entry["user"], entry["group"]], "membership " + entry["key"])
        return True


class UnitKind(Kind):
    """Enablement (enabled, disabled, masked, not-found) and activity of a systemd unit."""

    NAME = "unit"

    def record(self, rec, values):
        for unit in values:
            if rec.manifest.find(self.NAME, unit) is None:
                rec.add(rec.entry(self.NAME, unit, **unit_state(unit)))

    def undo(self, ctx, entry):
        unit = entry["key"]
        now = unit_state(unit)
        ok = True
        if entry["enabled"] != "masked" and now["enabled"] == "masked":
            ctx.undone.append({"unit": unit, "action": "unmask"})
            ok &= ctx.run(["systemctl", "unmask", unit], "unit " + unit)
            now = unit_state(unit) if not ctx.check else dict(now, enabled=entry["enabled"])
        if entry["enabled"] == "masked" and now["enabled"] != "masked":
            ctx.undone.append({"unit": unit, "action": "mask"})
            ok &= ctx.run(["systemctl", "mask", unit], "unit " + unit)
        elif entry["enabled"] == "enabled" and now["enabled"] == "disabled":
            ctx.undone.append({"unit": unit, "action": "enable"})
            ok &= ctx.run(["systemctl", "enable", unit], "unit " + unit)
        elif entry["enabled"] in ("disabled", "not-found") and now["enabled"] == "enabled":
            ctx.undone.append({"unit": unit, "action": "disable"})
            ok &= ctx.run(["systemctl", "disable", unit], "unit " + unit)
        if entry["active"] != "active" and now["active"] == "active":
            ctx.undone.append({"unit": unit, "action": "stop"})
            ok &= ctx.run(["systemctl", "stop", unit], "unit " + unit)
        elif entry["active"] == "active" and now["active"] != "active" and now["enabled"] != "not-found":
            ctx.undone.append({"unit": unit, "action": "start"})
            ok &= ctx.run(["systemctl", "start", unit], "unit " + unit)
        return ok


class SysctlKind(Kind):
    """A runtime sysctl value (the persistent drop-in is a file entry)."""

    NAME = "sysctl"

    def record(self, rec, values):
        for key in values:
            if rec.manifest.find(self.NAME, key) is None:
                value = sysctl_value(key)
                if value is not None:
                    rec.add(rec.entry(self.NAME, key, value=value))

    def undo(self, ctx, entry):
        current = sysctl_value(entry["key"])
        if current is None or current == entry["value"]:
            return True
        ctx.undone.append({"sysctl": entry["key"], "action": "set", "value": entry["value"]})
        if not ctx.check:
            try:
                with open(sysctl_path(entry["key"]), "w", encoding="utf-8") as handle:
                    handle.write(entry["value"])
            except OSError as exc:
                # Read-only /proc/sys (containers): the drop-in is gone, so the next boot
                # restores the value; nothing more can be done from inside.
                ctx.kept.append({"what": "sysctl " + entry["key"], "why": str(exc)})
        return True


INTERFACE = "{interface}"
SYS_NET = "/sys/class/net"


def interfaces_now():
    try:
        return sorted(os.listdir(SYS_NET))
    except OSError:
        return []


def is_bridge(name):
    return os.path.isdir(os.path.join(SYS_NET, name, "bridge"))


def matching_now(pattern, bridges):
    """Interfaces present now whose name matches ``pattern`` and, with ``bridges``, every
    bridge whatever its name (Docker names a network's bridge after
    com.docker.network.bridge.name when the network sets it)."""
    return [name for name in interfaces_now() if pattern.fullmatch(name) or (bridges and is_bridge(name))]


def _interface_template(rec, item, field):
    template, pattern = item[field], item["interfaces"]
    if template.count(INTERFACE) != 1:
        rec.module.fail_json(msg="%s must hold %s exactly once, got %r" % (field, INTERFACE, template))
    try:
        return template, re.compile(pattern)
    except re.error as exc:
        rec.module.fail_json(msg="interfaces is not a regular expression (%s): %r" % (exc, pattern))


class SysctlDefaultKind(Kind):
    """A per-interface sysctl for every interface matching a pattern, those that exist at
    rollback included: a daemon the profile configures may create interfaces later and set the
    sysctl on them (dockerd with userland-proxy off sets route_localnet=1 on each bridge it
    creates). The matching interfaces present now get their own sysctl entry; the default
    entry remembers which they were and the value a later one gets on rollback (what the
    kernel and the owner's own configuration would have given it)."""

    NAME = "sysctl_default"

    def record(self, rec, values):
        for item in values:
            template, pattern = _interface_template(rec, item, "key")
            if rec.manifest.find(self.NAME, template) is not None:
                continue
            known = matching_now(pattern, item["bridges"])
            SYSCTL.record(rec, [template.replace(INTERFACE, name) for name in known])
            rec.add(rec.entry(self.NAME, template, interfaces=item["interfaces"], bridges=item["bridges"],
                              value=item["value"], known=known))

    def undo(self, ctx, entry):
        for name in matching_now(re.compile(entry["interfaces"]), entry.get("bridges", False)):
            if name not in entry["known"]:
                SYSCTL.undo(ctx, {"key": entry["key"].replace(INTERFACE, name), "value": entry["value"]})
        return True


class NftTableKind(Kind):
    """An nftables table: one that did not exist is deleted on rollback (Docker's iptables-nft
    tables outlive the purged engine until the next boot); in one that existed (ufw's
    ``ip filter``), the chains and rules added since are removed and changed chain policies set
    back, from its iptables-nft rules recorded then."""

    NAME = "nft_table"

    def record(self, rec, values):
        if not values:
            return
        existing = nft_tables(rec.module)
        for table in values:
            if existing is None or rec.manifest.find(self.NAME, table) is not None:
                continue
            if table not in existing:
                rec.add(rec.entry(self.NAME, table))
                continue
            saved = iptables_table(rec.module, table)
            if saved is not None:
                rec.add(rec.entry(self.NAME, table, existed=True, chains=saved[0], rules=saved[1]))

    def undo(self, ctx, entry):
        existing = nft_tables(ctx.module) or set()
        if entry["key"] not in existing:
            return True
        if entry.get("existed"):
            return self._remove_added(ctx, entry)
        ctx.undone.append({"nft_table": entry["key"], "action": "delete"})
        family, name = entry["key"].split(" ", 1)
        return ctx.run(["nft", "delete", "table", family, name], "nft table " + entry["key"])

    @staticmethod
    def _remove_added(ctx, entry):
        now = iptables_table(ctx.module, entry["key"])
        if now is None:
            ctx.errors.append({"what": "nft table " + entry["key"], "why": "iptables-nft cannot read it"})
            return False
        chains, rules = now
        binary = [ctx.module.get_bin_path(IPTABLES_NFT[entry["key"].split()[0]]), "-w", "-t", entry["key"].split()[1]]
        new_chains = [c for c in chains if c not in entry["chains"]]
        before = list(entry["rules"])
        added = []
        for rule in rules:
            if rule in before:
                before.remove(rule)
            elif shlex.split(rule)[1] not in new_chains:
                added.append(rule)
        what = "nft table " + entry["key"]
        ok = True
        if new_chains or added:
            ctx.undone.append({"nft_table": entry["key"], "action": "remove added", "chains": new_chains,
                               "rules": added})
        for chain in new_chains:
            ok &= ctx.run(binary + ["-F", chain], what)
        for rule in reversed(added):
            ok &= ctx.run(binary + ["-D"] + shlex.split(rule)[1:], what)
        for chain in new_chains:
            ok &= ctx.run(binary + ["-X", chain], what)
        for chain, policy in entry["chains"].items():
            if policy != "-" and chains.get(chain, policy) != policy:
                ctx.undone.append({"nft_table": entry["key"], "action": "policy", "chain": chain, "policy": policy})
                ok &= ctx.run(binary + ["-P", chain, policy], what)
        return ok


# iptables-nft's own tables, by nftables family: the tool that reads and edits them.
IPTABLES_NFT = {"ip": "iptables-nft", "ip6": "ip6tables-nft"}


def iptables_table(module, table):
    """(chain -> policy, rule lines "-A CHAIN ...") of an iptables-nft table, or None when it
    is not one (another family, native nft rules iptables cannot print, no iptables-nft)."""
    family, name = table.split(" ", 1)
    binary = module.get_bin_path(IPTABLES_NFT.get(family, "") + "-save") if family in IPTABLES_NFT else None
    if binary is None:
        return None
    rc, out, err = module.run_command([binary, "-t", name])
    if rc != 0 or "incompatible" in out + err:
        return None
    chains, rules = {}, []
    for line in out.splitlines():
        if line.startswith(":"):
            chain, policy = line[1:].split()[:2]
            chains[chain] = policy
        elif line.startswith("-A "):
            rules.append(line.strip())
    return chains, rules


class PackagesKind(Kind):
    """Packages about to be installed. record() snapshots installed packages, users and
    groups; finalize() after the install keeps only the difference, so rollback purges exactly
    what the install added (dependencies and package-created accounts included)."""

    NAME = "packages"

    @staticmethod
    def key(packages):
        return ",".join(sorted(packages))

    def record(self, rec, values):
        if not values:
            return
        status = dpkg_status(rec.module)
        absent = sorted(n for n in values if status.get(n, ("", ""))[1] != "installed")
        rec.absent_packages = absent
        key = self.key(values)
        pending = rec.manifest.find(self.NAME, key, rec.role)
        # finalize_packages has work only then: an install to record now, or one a killed run
        # left unrecorded.
        rec.packages_pending = bool(absent) or (pending is not None and not pending.get("finalized"))
        if absent and (pending is None or pending.get("finalized")):
            if pending is not None:
                # Finalized before and yet absent again (removed by hand): record anew.
                pending["key"] = key + "#%d" % pending["seq"]
            rec.add(rec.entry(self.NAME, key, requested_absent=absent,
                              pre_installed=sorted(n for n, (_w, s) in status.items() if s == "installed"),
                              pre_users=user_names(), pre_groups=group_names(), finalized=False,
                              added=[], added_users=[], added_groups=[]),
                    touches_accounts=True)

    def finalize(self, module, manifest, role, packages):
        key = self.key(packages)
        entry = manifest.find(self.NAME, key, role)
        if entry is None or entry.get("finalized"):
            return []
        now = set(installed_packages(module))
        entry["added"] = sorted(now - set(entry["pre_installed"]))
        entry["added_users"] = sorted(set(user_names()) - set(entry["pre_users"]))
        entry["added_groups"] = sorted(set(group_names()) - set(entry["pre_groups"]))
        entry["finalized"] = True
        # The snapshots were only needed to compute the delta.
        for field in ("pre_installed", "pre_users", "pre_groups"):
            entry[field] = []
        return [{"kind": self.NAME, "key": key, "added": entry["added"],
                 "added_users": entry["added_users"], "added_groups": entry["added_groups"]}]

    def undo(self, ctx, entry):
        now = set(installed_packages(ctx.module))
        if entry.get("finalized"):
            candidates = set(entry["added"])
            new_users, new_groups = entry["added_users"], entry["added_groups"]
        else:
            # Interrupted between install and finalize: what the install added is what is new
            # since the snapshot and was either asked for or pulled in automatically.
            fresh = now - set(entry["pre_installed"])
            candidates = fresh & (set(entry["requested_absent"]) | auto_installed(ctx.module))
            new_users = sorted(set(user_names()) - set(entry["pre_users"]))
            new_groups = sorted(set(group_names()) - set(entry["pre_groups"]))
        ok = self._purge(ctx, candidates, now)
        if ok is None:
            return False
        for user in new_users:
            if user in user_names():
                ctx.undone.append({"user": user, "action": "delete"})
                ok &= ctx.run(["userdel", user], "user " + user)
        for group in new_groups:
            if group in group_names():
                ctx.undone.append({"group": group, "action": "delete"})
                ok &= ctx.run(["groupdel", group], "group " + group)
        return ok

    @staticmethod
    def _purge(ctx, candidates, now):
        """True/False for the purge's outcome; None when it was refused (nothing else is tried)."""
        purge = sorted(candidates & now)
        if purge and not ctx.check:
            # A run interrupted during dpkg leaves half-configured packages; apt refuses to do
            # anything until dpkg has finished its own work.
            _rc, out, _err = ctx.module.run_command(["dpkg", "--audit"], environ_update=APT_ENV)
            if out.strip():
                ctx.run(["dpkg", "--configure", "-a"], "dpkg --configure -a")
                purge = sorted(candidates & set(installed_packages(ctx.module)))
        if not purge:
            return True
        # Simulate first: never let the purge take anything else with it.
        rc, out, err = ctx.module.run_command(["apt-get", "-s", "purge"] + purge, environ_update=APT_ENV)
        removed = set(re.findall(r"^Purg (\S+)", out, re.M)) | set(re.findall(r"^Remv (\S+)", out, re.M))
        extra = sorted(removed - set(purge))
        if rc != 0 or extra:
            ctx.errors.append({"what": "packages " + " ".join(purge),
                               "why": "purging them would also remove %s" % (", ".join(extra) or err.strip())})
            return None
        ctx.undone.append({"packages": purge, "action": "purge"})
        return ctx.run(["apt-get", "purge", "-y", "-q", "--allow-change-held-packages"] + purge,
                       "packages " + " ".join(purge))


class HoldKind(Kind):
    """A package put on hold: installed packages matching a record's hold_patterns that were not
    on hold. Holding happens here too, right after the entries are saved."""

    NAME = "hold"

    def record(self, rec, values):
        patterns = [re.compile(x) for x in values]
        status = dpkg_status(rec.module)
        to_hold = sorted(
            name for name, (want, st) in status.items()
            if st == "installed" and want != "hold" and any(r.fullmatch(name) for r in patterns))
        for name in to_hold:
            if rec.manifest.find(self.NAME, name) is None:
                entry = rec.entry(self.NAME, name, want=status[name][0])
                rec.manifest.add(entry)
                rec.recorded.append(dict(entry))
        if to_hold and not rec.module.check_mode:
            rec.manifest.save()
            rc, _out, err = rec.module.run_command(["apt-mark", "hold"] + to_hold, environ_update=APT_ENV)
            if rc != 0:
                rec.module.fail_json(msg="apt-mark hold failed: %s" % err.strip(), recorded=rec.recorded)
        return to_hold

    def undo(self, ctx, entry):
        want = dpkg_status(ctx.module).get(entry["key"], ("", ""))[0]
        if want == "hold" and entry["want"] != "hold":
            ctx.undone.append({"package": entry["key"], "action": "unhold"})
            return ctx.run(["apt-mark", "unhold", entry["key"]], "hold " + entry["key"])
        return True


class IptablesRuleKind(Kind):
    """An IPv4 iptables rule that did not exist (dockerd adds masquerade rules for its
    bridges when userland-proxy is off, and Docker 20.10 leaves them when it is back on)."""

    NAME = "iptables_rule"

    @staticmethod
    def _check(module, spec):
        """True present, False absent (or no iptables at all), None: iptables could not tell."""
        binary = module.get_bin_path("iptables")
        if binary is None:
            return False
        table, chain, rule = spec[0], spec[1], spec[2:]
        rc, _out, _err = module.run_command([binary, "-w", "-t", table, "-C", chain] + rule)
        return True if rc == 0 else False if rc == 1 else None

    def record(self, rec, values):
        for key in values:
            spec = key.split()
            if len(spec) < 3:
                rec.module.fail_json(msg="iptables_rules entries are 'table chain rule...', got %r" % key)
            if rec.manifest.find(self.NAME, key) is not None:
                continue
            present = self._check(rec.module, spec)
            if present is None:
                rec.module.fail_json(msg="iptables could not check the rule %r" % key)
            if not present:
                rec.add(rec.entry(self.NAME, key))

    def undo(self, ctx, entry):
        spec = entry["key"].split()
        if self._check(ctx.module, spec):
            ctx.undone.append({"iptables_rule": entry["key"], "action": "delete"})
            return ctx.run([ctx.module.get_bin_path("iptables"), "-w", "-t", spec[0], "-D", spec[1]] + spec[2:],
                           "iptables rule " + entry["key"])
        return True


class IptablesRuleDefaultKind(Kind):
    """An iptables rule naming an interface, for every interface matching a pattern: dockerd
    with userland-proxy off adds `-o BRIDGE -m addrtype --src-type LOCAL -j MASQUERADE` for
    each bridge, those it creates later included, and Docker 20.10 keeps them when the proxy
    is back on, even for a network it then removes. The matching interfaces present now get
    their own iptables_rule entry; on rollback the rule is deleted for every other interface
    (present or named in the chain's rules) unless ``present`` says the owner's configuration
    would have it."""

    NAME = "iptables_rule_default"

    def record(self, rec, values):
        for item in values:
            template, pattern = _interface_template(rec, item, "rule")
            if len(template.split()) < 3:
                rec.module.fail_json(msg="iptables_rule_defaults rules are 'table chain rule...', got %r" % template)
            if rec.manifest.find(self.NAME, template) is not None:
                continue
            known = matching_now(pattern, item["bridges"])
            IPTABLES_RULE.record(rec, [template.replace(INTERFACE, name) for name in known])
            rec.add(rec.entry(self.NAME, template, interfaces=item["interfaces"], bridges=item["bridges"],
                              present=item["present"], known=known))

    @staticmethod
    def _named_in_chain(ctx, table, chain):
        """Interfaces the chain's rules name (-i/-o), also those of bridges already removed."""
        binary = ctx.module.get_bin_path("iptables")
        if binary is None:
            return []
        rc, out, _err = ctx.module.run_command([binary, "-w", "-t", table, "-S", chain])
        return re.findall(r"(?:^|\s)-[io] (\S+)", out) if rc == 0 else []

    def undo(self, ctx, entry):
        if entry["present"]:
            return True
        pattern = re.compile(entry["interfaces"])
        table, chain = entry["key"].split()[:2]
        # a bridge already removed is known only by name: the pattern decides for it
        gone = [name for name in self._named_in_chain(ctx, table, chain) if pattern.fullmatch(name)]
        ok = True
        for name in sorted(set(matching_now(pattern, entry.get("bridges", False))) | set(gone)):
            if name not in entry["known"]:
                ok &= IPTABLES_RULE.undo(ctx, {"key": entry["key"].replace(INTERFACE, name)})
        return ok


PACKAGES = PackagesKind()
HOLD = HoldKind()
SYSCTL = SysctlKind()
IPTABLES_RULE = IptablesRuleKind()

# (module argument, kind), in record order. Rollback replays in reverse, so what others depend
# on (a group before its user, a user before the files it owns, a unit file before the unit's
# state) is recorded first and undone last.
RECORD_ORDER = [
    ("groups", AccountKind("group", group_names, "groupdel")),
    ("users", AccountKind("user", user_names, "userdel")),
    ("files", FileKind(tree=False)),
    ("trees", FileKind(tree=True)),
    ("group_members", MemberKind()),
    ("units", UnitKind()),
    ("sysctls", SYSCTL),
    ("sysctl_defaults", SysctlDefaultKind()),
    ("nft_tables", NftTableKind()),
    ("iptables_rules", IPTABLES_RULE),
    ("iptables_rule_defaults", IptablesRuleDefaultKind()),
    ("packages", PACKAGES),
]

BY_NAME = dict([(kind.NAME, kind) for _arg, kind in RECORD_ORDER] + [(HOLD.NAME, HOLD)])


def record(module, manifest, role):
    """action=record: returns the Recording (entries added, absent packages)."""
    rec = Recording(module, manifest, role)
    rec.absent_packages, rec.packages_pending = [], False
    for argument, kind in RECORD_ORDER:
        kind.record(rec, module.params[argument])
    return rec


def rollback(module, manifest, role):
    """action=rollback: replays the role's entries newest first, dropping each once undone."""
    ctx = Undo(module)
    mine = sorted((e for e in manifest.entries if e["role"] == role), key=lambda e: e["seq"], reverse=True)
    for entry in mine:
        kind = BY_NAME.get(entry["kind"])
        try:
            if kind is None:
                raise ValueError("unknown kind %r (written by a newer hostcheck_manifest?)" % entry["kind"])
            done = kind.undo(ctx, entry)
        except (OSError, ValueError) as exc:
            ctx.errors.append({"what": "%s %s" % (entry["kind"], entry["key"]), "why": str(exc)})
            done = False
        if done and not module.check_mode:
            manifest.entries.remove(entry)
            # Persist after every entry: an interrupted rollback resumes where it stopped.
            manifest.save()
    return ctx


# ---------------------------------------------------------------------------------------------
# The actions.

ACTIONS = ["record", "finalize_packages", "rollback", "status", "cleanup"]


def cleanup(module, manifest, result):
    directory = os.path.dirname(manifest.path)
    if not manifest.entries and os.path.isdir(directory):
        result["undone"] = [{"file": directory, "action": "remove"}]
        if module.params["remove_empty"] and not module.check_mode:
            manifest.unlock()
            shutil.rmtree(directory)
    elif manifest.entries:
        result["kept"] = [{"what": manifest.path, "why": "%d entries not rolled back yet" % len(manifest.entries)}]


def dispatch(module, manifest, action, role, result):
    if action == "record":
        rec = record(module, manifest, role)
        result["absent_packages"], result["packages_pending"] = rec.absent_packages, rec.packages_pending
        if rec.recorded and not module.check_mode:
            manifest.save()
        if module.params["hold_patterns"]:
            result["held"] = HOLD.record(rec, module.params["hold_patterns"])
        result["recorded"] = rec.recorded
    elif action == "finalize_packages":
        result["recorded"] = PACKAGES.finalize(module, manifest, role, module.params["packages"])
        if result["recorded"] and not module.check_mode:
            manifest.save()
    elif action == "rollback":
        undo = rollback(module, manifest, role)
        result["undone"], result["kept"], result["errors"] = undo.undone, undo.kept, undo.errors
    elif action == "cleanup":
        cleanup(module, manifest, result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type="str", default="record", choices=ACTIONS),
            role=dict(type="str"),
            path=dict(type="path", required=True),
            files=dict(type="list", elements="path", default=[]),
            trees=dict(type="list", elements="path", default=[]),
            packages=dict(type="list", elements="str", default=[]),
            units=dict(type="list", elements="str", default=[]),
            read_units=dict(type="list", elements="str", default=[]),
            users=dict(type="list", elements="str", default=[]),
            groups=dict(type="list", elements="str", default=[]),
            group_members=dict(type="list", elements="str", default=[]),
            sysctls=dict(type="list", elements="str", default=[]),
            nft_tables=dict(type="list", elements="str", default=[]),
            iptables_rules=dict(type="list", elements="str", default=[]),
            sysctl_defaults=dict(type="list", elements="dict", default=[], options=dict(
                key=dict(type="str", required=True, no_log=False), interfaces=dict(type="str", required=True),
                bridges=dict(type="bool", default=False), value=dict(type="str", required=True))),
            iptables_rule_defaults=dict(type="list", elements="dict", default=[], options=dict(
                rule=dict(type="str", required=True), interfaces=dict(type="str", required=True),
                bridges=dict(type="bool", default=False), present=dict(type="bool", default=False))),
            hold_patterns=dict(type="list", elements="str", default=[]),
            remove_empty=dict(type="bool", default=True),
        ),
        required_if=[("action", a, ("role",)) for a in ("record", "finalize_packages", "rollback")],
        supports_check_mode=True,
    )
    if os.geteuid() != 0:
        module.fail_json(msg="hostcheck_manifest must run as root (become: true)")
    action, role = module.params["action"], module.params["role"]
    manifest = Manifest(module.params["path"])
    result = dict(changed=False, recorded=[], undone=[], kept=[], errors=[], held=[], entries={},
                  absent_packages=[], packages_pending=False, keys={})
    manifest.lock()
    try:
        manifest.load()
        dispatch(module, manifest, action, role, result)
        for entry in manifest.entries:
            result["entries"][entry["role"]] = result["entries"].get(entry["role"], 0) + 1
            result["keys"].setdefault(entry["role"], []).append("%s:%s" % (entry["kind"], entry["key"]))
    finally:
        manifest.unlock()
    result["changed"] = bool(result["recorded"] or result["undone"] or result["held"])
    if action == "record":
        result["units_now"] = unit_states(module.params["units"] + module.params["read_units"])
    paths = module.params["files"] + module.params["trees"] if action == "record" else []
    if paths:
        # The paths as they are now, so hostcheck_copy and hostcheck_directory can skip what
        # already matches. A record of packages or accounts alone keeps the previous fact.
        result["ansible_facts"] = {"hostcheck_files_now": {
            os.path.normpath(p): file_summary(os.path.normpath(p)) for p in paths}}
    if result["errors"]:
        module.fail_json(msg="rollback of %s could not undo everything; see errors (the entries stay "
                         "in the manifest, so a rerun retries them)" % role, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
