# -*- coding: utf-8 -*-
# Copyright: hostcheck contributors
# Apache-2.0
"""The manifest document on disk and read-only snapshots of the live system.

The collection's module_utils, also linked into rollback_manifest's module_utils/ for runs from
a clone: Ansible puts a role's module_utils/ on the import path of ansible.module_utils whenever
the role is loaded (every profile role depends on it). AnsiballZ bundles what the module
imports into the payload it sends."""

from __future__ import annotations

import base64
import errno
import fcntl
import grp
import hashlib
import json
import os
import pwd
import stat
import tempfile
import time

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


def unit_state(module, unit):
    _rc, enabled, _err = module.run_command(["systemctl", "is-enabled", unit])
    _rc, active, _err = module.run_command(["systemctl", "is-active", unit])
    enabled = enabled.strip() or "not-found"
    return {"enabled": enabled, "active": active.strip() or "unknown"}


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
