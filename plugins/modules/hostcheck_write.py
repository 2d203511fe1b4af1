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
  - Refuses a I(dest) that is a symbolic link or not a regular file (the action then leaves it
    to ansible.builtin.copy, which the role's record would have sent it to anyway).
options:
  dest:
    description: The file.
    type: path
    required: true
  content:
    description: The whole content (UTF-8).
    type: str
    required: true
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
author: hostcheck contributors
"""

RETURN = r"""
dest:
  description: The file.
  type: str
  returned: always
checksum:
  description: SHA1 of the content asked for.
  type: str
  returned: always
"""

import grp
import hashlib
import os
import pwd
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule


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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            content=dict(type="str", required=True, no_log=True),
            mode=dict(type="str", required=True),
            owner=dict(type="str", required=True),
            group=dict(type="str", required=True),
            validate=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    dest = p["dest"]
    data = p["content"].encode("utf-8", "surrogateescape")
    result = dict(dest=dest, checksum=hashlib.sha1(data).hexdigest(), changed=False)
    try:
        mode = int(p["mode"], 8)
        uid = int(p["owner"]) if p["owner"].isdigit() else pwd.getpwnam(p["owner"]).pw_uid
        gid = int(p["group"]) if p["group"].isdigit() else grp.getgrnam(p["group"]).gr_gid
        now = current(dest)
    except (ValueError, KeyError) as exc:
        module.fail_json(msg="hostcheck_write: %s" % exc, **result)
    if now == (data, mode, uid, gid):
        module.exit_json(**result)
    result["changed"] = True
    if module.check_mode:
        module.exit_json(**result)
    if now is not None and now[0] == data:  # only the attributes differ
        os.chown(dest, uid, gid)
        os.chmod(dest, mode)
        module.exit_json(**result)
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
            if "%s" not in p["validate"]:
                module.fail_json(msg="hostcheck_write: validate must contain %%s: %s" % p["validate"], **result)
            rc, out, err = module.run_command(p["validate"] % temporary)
            if rc != 0:
                module.fail_json(msg="failed to validate", exit_status=rc, stdout=out, stderr=err, **result)
        if module.selinux_enabled():
            module.set_default_selinux_context(temporary, False)
        os.rename(temporary, dest)
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
