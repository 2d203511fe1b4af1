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
    users and groups that did not exist; unit enablement; runtime sysctl values; dpkg
    selections; group memberships) in a root-only JSON manifest on the host.
  - Only the first record of a thing counts, so re-runs keep the pre-profile state.
  - Every record is written to disk before the module returns, so a run interrupted halfway
    can still be rolled back.
  - C(action=rollback) replays one role's entries in reverse order and drops each entry once
    it has been undone, so an interrupted rollback can be resumed.
options:
  action:
    description: What to do.
    type: str
    choices: [record, finalize_packages, hold, rollback, status, cleanup]
    default: record
  role:
    description: Role the entries belong to (required except for status and cleanup).
    type: str
  path:
    description: Manifest file.
    type: path
    default: /var/lib/hostcheck-profile/manifest.json
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
        the purged engine until the next boot).
    type: list
    elements: str
    default: []
  hold_patterns:
    description:
      - For C(action=hold), regular expressions (full match) of package names. Installed
        packages that match and are not on hold are recorded and put on hold.
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
    role: ssh_hardening
    files: [/etc/ssh/sshd_config.d/01-hostcheck.conf]

- name: Undo everything this role changed
  hostcheck_manifest:
    role: ssh_hardening
    action: rollback
"""

RETURN = r"""
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

import base64
import errno
import fcntl
import grp
import json
import os
import pwd
import re
import shutil
import stat
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

# Files bigger than this are config files no role of the profile touches; refusing them keeps
# the manifest small and avoids silently truncating anything.
MAX_FILE_BYTES = 4 * 1024 * 1024
# shadow's tools (useradd, groupdel, gpasswd, and package scripts calling them) rewrite these
# backups on every account change. They are recorded with the first account-related entry so
# that rollback leaves them as they were, not as the last userdel left them.
ACCOUNT_BACKUPS = ["/etc/passwd-", "/etc/group-", "/etc/shadow-", "/etc/gshadow-"]
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}


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
            self.data["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
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
        entry["at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.data["next_seq"] += 1
        self.entries.append(entry)

    def find(self, kind, key, role=None):
        for entry in self.entries:
            if entry["kind"] == kind and entry.get("key") == key and (role is None or entry["role"] == role):
                return entry
        return None


# --- snapshots of the live system -----------------------------------------------------------

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


def unit_state(module, unit):
    _rc, enabled, _err = module.run_command(["systemctl", "is-enabled", unit])
    _rc, active, _err = module.run_command(["systemctl", "is-active", unit])
    enabled = enabled.strip() or "not-found"
    return {"enabled": enabled, "active": active.strip() or "unknown"}


def sysctl_value(key):
    path = "/proc/sys/" + key.replace(".", "/")
    try:
        with open(path, "r", encoding="utf-8") as handle:
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


# --- record ---------------------------------------------------------------------------------

def do_record(module, manifest, role, extras):
    p = module.params
    recorded = []

    def add(entry):
        if entry["kind"] in ("user", "group", "member", "packages"):
            record_files(ACCOUNT_BACKUPS, tree=False)
        recorded.append({k: v for k, v in entry.items() if k != "content_b64"})
        manifest.add(entry)

    def record_files(paths, tree):
        for path in paths:
            path = os.path.normpath(path)
            if manifest.find("file", path) is None:
                try:
                    state = file_state(path)
                except (OSError, ValueError) as exc:
                    module.fail_json(msg="cannot record %s: %s" % (path, exc))
                entry = dict(kind="file", key=path, role=role, tree=tree, **state)
                recorded.append({k: v for k, v in entry.items() if k != "content_b64"})
                manifest.add(entry)

    # Order matters: rollback replays in reverse, so what others depend on (a group before
    # its user, a user before the files it owns, a unit file before the unit's state) is
    # recorded first and undone last.
    for name in p["groups"]:
        if manifest.find("group", name) is None and name not in group_names():
            add(dict(kind="group", key=name, role=role))

    for name in p["users"]:
        if manifest.find("user", name) is None and name not in user_names():
            add(dict(kind="user", key=name, role=role))

    record_files(p["files"], tree=False)
    record_files(p["trees"], tree=True)

    for spec in p["group_members"]:
        if ":" not in spec:
            module.fail_json(msg="group_members entries are group:user, got %r" % spec)
        group, user = spec.split(":", 1)
        if manifest.find("member", spec) is None and group_has_member(group, user):
            add(dict(kind="member", key=spec, role=role, group=group, user=user))

    for unit in p["units"]:
        if manifest.find("unit", unit) is None:
            add(dict(kind="unit", key=unit, role=role, **unit_state(module, unit)))

    for key in p["sysctls"]:
        if manifest.find("sysctl", key) is None:
            value = sysctl_value(key)
            if value is not None:
                add(dict(kind="sysctl", key=key, role=role, value=value))

    if p["nft_tables"]:
        existing = nft_tables(module)
        for table in p["nft_tables"]:
            if existing is not None and manifest.find("nft_table", table) is None and table not in existing:
                add(dict(kind="nft_table", key=table, role=role))

    if p["packages"]:
        status = dpkg_status(module)
        absent = sorted(n for n in p["packages"] if status.get(n, ("", ""))[1] != "installed")
        extras["absent_packages"] = absent
        key = ",".join(sorted(p["packages"]))
        pending = manifest.find("packages", key, role)
        if absent and (pending is None or pending.get("finalized")):
            if pending is not None:
                # Finalized before and yet absent again (removed by hand): record anew.
                pending["key"] = key + "#%d" % pending["seq"]
            add(dict(kind="packages", key=key, role=role, requested_absent=absent,
                     pre_installed=sorted(n for n, (_w, s) in status.items() if s == "installed"),
                     pre_users=user_names(), pre_groups=group_names(), finalized=False,
                     added=[], added_users=[], added_groups=[]))
    return recorded


def do_finalize(module, manifest, role):
    key = ",".join(sorted(module.params["packages"]))
    entry = manifest.find("packages", key, role)
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
    return [{"kind": "packages", "key": key, "added": entry["added"],
             "added_users": entry["added_users"], "added_groups": entry["added_groups"]}]


def do_hold(module, manifest, role):
    patterns = [re.compile(x) for x in module.params["hold_patterns"]]
    status = dpkg_status(module)
    to_hold = sorted(
        name for name, (want, st) in status.items()
        if st == "installed" and want != "hold" and any(r.fullmatch(name) for r in patterns))
    recorded = []
    for name in to_hold:
        if manifest.find("hold", name) is None:
            entry = dict(kind="hold", key=name, role=role, want=status[name][0])
            manifest.add(entry)
            recorded.append(dict(entry))
    if to_hold and not module.check_mode:
        manifest.save()
        rc, _out, err = module.run_command(["apt-mark", "hold"] + to_hold, environ_update=APT_ENV)
        if rc != 0:
            module.fail_json(msg="apt-mark hold failed: %s" % err.strip(), recorded=recorded)
    return recorded, to_hold


# --- rollback -------------------------------------------------------------------------------

class Undo:
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

    # Each undo_* returns True when the entry is fully undone and can leave the manifest.

    def undo_file(self, entry):
        path = entry["key"]
        current = file_state(path) if os.path.lexists(path) else {"exists": False}
        if not entry["exists"]:
            if not current["exists"]:
                return True
            if current["type"] == "dir" and not entry.get("tree"):
                if os.listdir(path):
                    self.kept.append({"what": path, "why": "directory created by the profile is not empty; "
                                      "remove it by hand once its content is no longer needed"})
                    return True
            self.undone.append({"file": path, "action": "remove"})
            if not self.check:
                if current["type"] == "dir":
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            return True
        same = all(current.get(k) == entry.get(k) for k in ("type", "mode", "uid", "gid", "content_b64", "target"))
        if same:
            return True
        self.undone.append({"file": path, "action": "restore"})
        if self.check:
            return True
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
        uid = _resolve(pwd.getpwnam, entry.get("owner"), entry["uid"])
        gid = _resolve(grp.getgrnam, entry.get("group"), entry["gid"])
        os.lchown(path, uid, gid)
        if entry["type"] != "link":
            os.chmod(path, int(entry["mode"], 8))
        return True

    def undo_user(self, entry):
        if entry["key"] in user_names():
            self.undone.append({"user": entry["key"], "action": "delete"})
            return self.run(["userdel", entry["key"]], "user " + entry["key"])
        return True

    def undo_group(self, entry):
        if entry["key"] in group_names():
            self.undone.append({"group": entry["key"], "action": "delete"})
            return self.run(["groupdel", entry["key"]], "group " + entry["key"])
        return True

    def undo_member(self, entry):
        if entry["group"] in group_names() and not group_has_member(entry["group"], entry["user"]):
            self.undone.append({"member": entry["key"], "action": "re-add"})
            return self.run(["gpasswd", "-a", entry["user"], entry["group"]], "membership " + entry["key"])
        return True

    def undo_unit(self, entry):
        unit = entry["key"]
        now = unit_state(self.module, unit)
        ok = True
        if entry["enabled"] != "masked" and now["enabled"] == "masked":
            self.undone.append({"unit": unit, "action": "unmask"})
            ok &= self.run(["systemctl", "unmask", unit], "unit " + unit)
            now = unit_state(self.module, unit) if not self.check else dict(now, enabled=entry["enabled"])
        if entry["enabled"] == "masked" and now["enabled"] != "masked":
            self.undone.append({"unit": unit, "action": "mask"})
            ok &= self.run(["systemctl", "mask", unit], "unit " + unit)
        elif entry["enabled"] == "enabled" and now["enabled"] == "disabled":
            self.undone.append({"unit": unit, "action": "enable"})
            ok &= self.run(["systemctl", "enable", unit], "unit " + unit)
        elif entry["enabled"] in ("disabled", "not-found") and now["enabled"] == "enabled":
            self.undone.append({"unit": unit, "action": "disable"})
            ok &= self.run(["systemctl", "disable", unit], "unit " + unit)
        if entry["active"] != "active" and now["active"] == "active":
            self.undone.append({"unit": unit, "action": "stop"})
            ok &= self.run(["systemctl", "stop", unit], "unit " + unit)
        elif entry["active"] == "active" and now["active"] != "active" and now["enabled"] != "not-found":
            self.undone.append({"unit": unit, "action": "start"})
            ok &= self.run(["systemctl", "start", unit], "unit " + unit)
        return ok

    def undo_sysctl(self, entry):
        current = sysctl_value(entry["key"])
        if current is None or current == entry["value"]:
            return True
        self.undone.append({"sysctl": entry["key"], "action": "set", "value": entry["value"]})
        if not self.check:
            path = "/proc/sys/" + entry["key"].replace(".", "/")
            try:
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(entry["value"])
            except OSError as exc:
                # Read-only /proc/sys (containers): the drop-in is gone, so the next boot
                # restores the value; nothing more can be done from inside.
                self.kept.append({"what": "sysctl " + entry["key"], "why": str(exc)})
        return True

    def undo_hold(self, entry):
        want = dpkg_status(self.module).get(entry["key"], ("", ""))[0]
        if want == "hold" and entry["want"] != "hold":
            self.undone.append({"package": entry["key"], "action": "unhold"})
            return self.run(["apt-mark", "unhold", entry["key"]], "hold " + entry["key"])
        return True

    def undo_nft_table(self, entry):
        existing = nft_tables(self.module) or set()
        if entry["key"] in existing:
            self.undone.append({"nft_table": entry["key"], "action": "delete"})
            family, name = entry["key"].split(" ", 1)
            return self.run(["nft", "delete", "table", family, name], "nft table " + entry["key"])
        return True

    def undo_packages(self, entry):
        now = set(installed_packages(self.module))
        if entry.get("finalized"):
            candidates = set(entry["added"])
            new_users, new_groups = entry["added_users"], entry["added_groups"]
        else:
            # Interrupted between install and finalize: what the install added is what is new
            # since the snapshot and was either asked for or pulled in automatically.
            fresh = now - set(entry["pre_installed"])
            candidates = fresh & (set(entry["requested_absent"]) | auto_installed(self.module))
            new_users = sorted(set(user_names()) - set(entry["pre_users"]))
            new_groups = sorted(set(group_names()) - set(entry["pre_groups"]))
        purge = sorted(candidates & now)
        ok = True
        if purge and not self.check:
            # A run interrupted during dpkg leaves half-configured packages; apt refuses to do
            # anything until dpkg has finished its own work.
            rc, out, _err = self.module.run_command(["dpkg", "--audit"], environ_update=APT_ENV)
            if out.strip():
                self.run(["dpkg", "--configure", "-a"], "dpkg --configure -a")
                now = set(installed_packages(self.module))
                purge = sorted(candidates & now)
        if purge:
            # Simulate first: never let the purge take anything else with it.
            rc, out, err = self.module.run_command(["apt-get", "-s", "purge"] + purge, environ_update=APT_ENV)
            removed = set(re.findall(r"^Purg (\S+)", out, re.M)) | set(re.findall(r"^Remv (\S+)", out, re.M))
            extra = sorted(removed - set(purge))
            if rc != 0 or extra:
                self.errors.append({"what": "packages " + " ".join(purge),
                                  "why": "purging them would also remove %s" % (", ".join(extra) or err.strip())})
                return False
            self.undone.append({"packages": purge, "action": "purge"})
            ok = self.run(["apt-get", "purge", "-y", "-q", "--allow-change-held-packages"] + purge,
                          "packages " + " ".join(purge))
        for user in new_users:
            if user in user_names():
                self.undone.append({"user": user, "action": "delete"})
                ok &= self.run(["userdel", user], "user " + user)
        for group in new_groups:
            if group in group_names():
                self.undone.append({"group": group, "action": "delete"})
                ok &= self.run(["groupdel", group], "group " + group)
        return ok


def _resolve(getter, name, fallback):
    if name:
        try:
            return getter(name)[2]
        except KeyError:
            pass
    return fallback


def do_rollback(module, manifest, role):
    undo = Undo(module)
    mine = sorted((e for e in manifest.entries if e["role"] == role), key=lambda e: e["seq"], reverse=True)
    for entry in mine:
        handler = getattr(undo, "undo_" + entry["kind"])
        try:
            done = handler(entry)
        except (OSError, ValueError) as exc:
            undo.errors.append({"what": "%s %s" % (entry["kind"], entry["key"]), "why": str(exc)})
            done = False
        if done and not module.check_mode:
            manifest.entries.remove(entry)
            # Persist after every entry: an interrupted rollback resumes where it stopped.
            manifest.save()
    return undo


def main():
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type="str", default="record",
                        choices=["record", "finalize_packages", "hold", "rollback", "status", "cleanup"]),
            role=dict(type="str"),
            path=dict(type="path", default="/var/lib/hostcheck-profile/manifest.json"),
            files=dict(type="list", elements="path", default=[]),
            trees=dict(type="list", elements="path", default=[]),
            packages=dict(type="list", elements="str", default=[]),
            units=dict(type="list", elements="str", default=[]),
            users=dict(type="list", elements="str", default=[]),
            groups=dict(type="list", elements="str", default=[]),
            group_members=dict(type="list", elements="str", default=[]),
            sysctls=dict(type="list", elements="str", default=[]),
            nft_tables=dict(type="list", elements="str", default=[]),
            hold_patterns=dict(type="list", elements="str", default=[]),
            remove_empty=dict(type="bool", default=True),
        ),
        required_if=[("action", a, ("role",)) for a in ("record", "finalize_packages", "hold", "rollback")],
        supports_check_mode=True,
    )
    if os.geteuid() != 0:
        module.fail_json(msg="hostcheck_manifest must run as root (become: true)")
    action, role = module.params["action"], module.params["role"]
    manifest = Manifest(module.params["path"])
    result = dict(changed=False, recorded=[], undone=[], kept=[], errors=[], held=[], entries={},
                  absent_packages=[], keys={})
    manifest.lock()
    try:
        manifest.load()
        if action == "record":
            result["recorded"] = do_record(module, manifest, role, result)
            if result["recorded"] and not module.check_mode:
                manifest.save()
        elif action == "finalize_packages":
            result["recorded"] = do_finalize(module, manifest, role)
            if result["recorded"] and not module.check_mode:
                manifest.save()
        elif action == "hold":
            result["recorded"], result["held"] = do_hold(module, manifest, role)
        elif action == "rollback":
            undo = do_rollback(module, manifest, role)
            result["undone"], result["kept"], result["errors"] = undo.undone, undo.kept, undo.errors
        elif action == "cleanup":
            if not manifest.entries and os.path.isdir(os.path.dirname(manifest.path)):
                result["undone"] = [{"file": os.path.dirname(manifest.path), "action": "remove"}]
                if module.params["remove_empty"] and not module.check_mode:
                    manifest.unlock()
                    shutil.rmtree(os.path.dirname(manifest.path))
            elif manifest.entries:
                result["kept"] = [{"what": manifest.path,
                                   "why": "%d entries not rolled back yet" % len(manifest.entries)}]
        for entry in manifest.entries:
            result["entries"][entry["role"]] = result["entries"].get(entry["role"], 0) + 1
            result["keys"].setdefault(entry["role"], []).append("%s:%s" % (entry["kind"], entry["key"]))
    finally:
        manifest.unlock()
    result["changed"] = bool(result["recorded"] or result["undone"] or result["held"])
    if result["errors"]:
        module.fail_json(msg="rollback of %s could not undo everything; see errors (the entries stay "
                         "in the manifest, so a rerun retries them)" % role, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
