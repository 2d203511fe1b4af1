#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hostcheck contributors
# Apache-2.0
"""Write one file's whole content, mode, owner and group in a single call to the host."""

from __future__ import annotations

DOCUMENTATION = r"""
module: hostcheck_write
short_description: Write a file's content, mode, owner and group in one call to the host
description:
  - What hostcheck_copy runs when the role's manifest record shows that a file is absent or not
    as wanted. ansible.builtin.copy costs three calls to the host there (a stat with checksum,
    the transfer, the copy module); this module is one, with the content in its arguments.
  - The content goes to a temporary file beside I(dest) (a dot file ending in C(.tmp), which no
    drop-in directory of sshd, sudo, systemd, sysctl, modprobe or APT reads), already with the
    mode, owner and group asked for, is checked with I(validate) when given, and is renamed over
    I(dest). Nothing is written when the content, mode, owner and group are as asked.
  - With C(--diff) it returns what ansible.builtin.copy shows (the content before and after,
    and the mode, owner and group before and after when they change).
  - Refuses a I(dest) that is a symbolic link or not a regular file (the action then leaves it
    to ansible.builtin.copy, which the role's record would have sent it to anyway).
  - With I(state=directory), what hostcheck_directory runs for a directory the record found
    absent or with other attributes, in one call instead of the file module's AnsiballZ one.
options:
  dest:
    description: The file.
    type: path
    required: true
  content:
    description: The whole content (UTF-8); required with I(state=file).
    type: str
  mode:
    description: Octal mode, e.g. C("0644").
    type: str
    required: true
  owner:
    description: Owner name.
    type: str
    required: true
  group:
    description: Group name.
    type: str
    required: true
  validate:
    description: Command run on the temporary file before it replaces I(dest); C(%s) is its path.
    type: str
  state:
    description:
      - C(directory) makes I(dest) a directory with this mode, owner and group, as
        ansible.builtin.file with C(state=directory) does (missing parents are created with the
        same attributes); I(content) and I(validate) are not taken then. An existing directory
        only gets its mode, owner and group set; anything else at I(dest) is refused.
    type: str
    choices: [file, directory]
    default: file
author: hostcheck contributors
"""

RETURN = r"""
dest:
  description: The file or directory.
  type: str
  returned: always
checksum:
  description: SHA1 of the content asked for.
  type: str
  returned: when state is file
path:
  description: The directory (as ansible.builtin.file returns it).
  type: str
  returned: when state is directory
"""

# Ansible substitutes the arguments as JSON for the marker below and pipes this file to the
# host's Python as it is (see hostcheck_read): no AnsiballZ, so no ansible.module_utils, and the
# standard library only.
# <<INCLUDE_ANSIBLE_MODULE_JSON_ARGS>>

import grp
import hashlib
import json
import os
import pwd
import shlex
import stat
import subprocess
import sys
import tempfile

ARGS = "<<INCLUDE_ANSIBLE_MODULE_COMPLEX_ARGS>>"
REQUIRED = ("dest", "content", "mode", "owner", "group")
OPTIONAL = ("validate", "state")


def finish(result, failed=None):
    if failed:
        result.update(failed=True, msg="hostcheck_write: %s" % failed)
    print(json.dumps(result))
    sys.exit(1 if failed else 0)


def arguments(raw):
    """The options as strings, or why not."""
    unknown = sorted(k for k in raw if k not in REQUIRED + OPTIONAL and not k.startswith("_ansible_"))
    if unknown:
        return None, "unsupported parameters: %s" % ", ".join(unknown)
    state = raw.get("state") or "file"
    if state not in ("file", "directory"):
        return None, "state must be one of file, directory, got %r" % (state,)
    if state == "directory":
        given = [k for k in ("content", "validate") if raw.get(k) is not None]
        if given:
            return None, "state=directory takes no %s" % ", ".join(given)
    required = [k for k in REQUIRED if state == "file" or k != "content"]
    missing = [k for k in required if raw.get(k) is None]
    if missing:
        return None, "missing required arguments: %s" % ", ".join(missing)
    wrong = [k for k in REQUIRED + OPTIONAL if raw.get(k) is not None and not isinstance(raw[k], (str, int))]
    if wrong:
        return None, "must be strings: %s" % ", ".join(wrong)
    params = {k: (None if raw.get(k) is None else str(raw[k])) for k in REQUIRED + OPTIONAL}
    params["state"] = state
    return params, None


def current(dest):
    """(content, mode, uid, gid) of a regular file, None when absent; raises ValueError for a
    link or anything else."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("%s is not a regular file (a link, a directory or a device): not replaced" % dest)
    with open(dest, "rb") as handle:
        return handle.read(), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def account(getter, ident):
    try:
        return getter(ident)[0]
    except KeyError:
        return str(ident)


def wanted(p):
    """(mode, uid, gid) asked for; raises ValueError or KeyError for a bad mode or account."""
    mode = int(p["mode"], 8)
    uid = int(p["owner"]) if p["owner"].isdigit() else pwd.getpwnam(p["owner"]).pw_uid
    gid = int(p["group"]) if p["group"].isdigit() else grp.getgrnam(p["group"]).gr_gid
    return mode, uid, gid


def attribute_diff(path, before, after):
    """Mode, owner and group before and after, each a (mode, uid, gid), as the file module shows them."""
    def shown(attrs):
        return {"path": path, "mode": "%04o" % attrs[0], "owner": account(pwd.getpwuid, attrs[1]),
                "group": account(grp.getgrgid, attrs[2])}
    return {"before": shown(before), "after": shown(after)}


def diff(dest, now, data, attrs):
    """The content's diff, then the attributes' when they change, as copy and file show them."""
    shown = [{"before_header": dest, "after_header": dest,
              "before": "" if now is None else now[0].decode("utf-8", "surrogateescape"),
              "after": data.decode("utf-8", "surrogateescape")}]
    if now is not None and now[1:] != attrs:
        shown.append(attribute_diff(dest, now[1:], attrs))
    return shown


def validated(command, temporary, result):
    """Run the validate command on the temporary file; finish with its output when it fails."""
    if "%s" not in command:
        finish(result, "validate must contain %%s: %s" % command)
    try:
        done = subprocess.run(shlex.split(command % shlex.quote(temporary)), stdin=subprocess.DEVNULL,
                              capture_output=True, check=False)
    except OSError as exc:
        finish(result, "cannot run the validate command: %s" % (exc.strerror or exc))
    if done.returncode != 0:
        result.update(exit_status=done.returncode, stdout=done.stdout.decode("utf-8", "replace"),
                      stderr=done.stderr.decode("utf-8", "replace"))
        finish(result, "failed to validate")


def directory(p, raw):
    """state=directory: mkdir -p with the attributes on every directory created, or the
    attributes set on the existing directory."""
    dest = os.path.normpath(p["dest"])
    result = dict(dest=dest, path=dest, state="directory", changed=False)
    try:
        mode, uid, gid = attrs = wanted(p)
        st = os.lstat(dest)
    except FileNotFoundError:
        st = None
    except (ValueError, KeyError, OSError) as exc:
        finish(result, str(exc))
    if st is not None and not stat.S_ISDIR(st.st_mode):
        finish(result, "%s already exists and is not a directory (a link, a file or a device)" % dest)
    now = None if st is None else (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    if now == attrs:
        finish(result)
    result["changed"] = True
    if raw.get("_ansible_diff"):
        result["diff"] = (attribute_diff(dest, now, attrs) if now is not None else
                          {"before": {"path": dest, "state": "absent"}, "after": {"path": dest, "state": "directory"}})
    if raw.get("_ansible_check_mode"):
        finish(result)
    if st is None:
        missing = []
        path = dest
        while not os.path.lexists(path):
            missing.append(path)
            path = os.path.dirname(path)
        for path in reversed(missing):
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                if not os.path.isdir(path) or os.path.islink(path):
                    finish(result, "%s appeared meanwhile and is not a directory" % path)
                continue
            os.chown(path, uid, gid)
            os.chmod(path, mode)
    else:
        os.chown(dest, uid, gid)
        os.chmod(dest, mode)
    finish(result)


def main():
    raw = json.loads(ARGS)
    p, why = arguments(raw)
    if why:
        finish({"changed": False}, why)
    if p["state"] == "directory":
        directory(p, raw)
    dest = p["dest"]
    data = p["content"].encode("utf-8", "surrogateescape")
    result = dict(dest=dest, checksum=hashlib.sha1(data).hexdigest(), changed=False)
    try:
        mode, uid, gid = attrs = wanted(p)
        now = current(dest)
    except (ValueError, KeyError) as exc:
        finish(result, str(exc))
    if now == (data,) + attrs:
        finish(result)
    result["changed"] = True
    if raw.get("_ansible_diff"):
        result["diff"] = diff(dest, now, data, attrs)
    if raw.get("_ansible_check_mode"):
        finish(result)
    if now is not None and now[0] == data:  # only the attributes differ
        os.chown(dest, uid, gid)
        os.chmod(dest, mode)
        finish(result)
    folder = os.path.dirname(dest) or "."
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".hostcheck-", suffix=".tmp")
    try:
        os.fchown(handle, uid, gid)
        os.fchmod(handle, mode)
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if p["validate"]:
            validated(p["validate"], temporary, result)
        os.rename(temporary, dest)
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)
    finish(result)


if __name__ == "__main__":
    main()
