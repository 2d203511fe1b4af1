# -*- coding: utf-8 -*-
# Copyright: hostcheck contributors
# Apache-2.0
"""ansible.builtin.file with state=directory, answered from the controller when the role's
manifest record found the directory already with this mode, owner and group (see
hostcheck_copy, whose helpers it shares), and made by hostcheck_write (state=directory) in
one call when the record found it absent or with other attributes.

A symbolic mode that only takes permissions away ("g-w,o-rwx", no owner or group asked for) is
answered the same way when the recorded mode has none of those bits: the builtin would change
nothing. Any other symbolic mode depends on more than the record holds and goes to the builtin."""

from __future__ import annotations

import importlib.util
import os
import re

from ansible.plugins.action import ActionBase

# Ansible loads each action plugin file on its own, not as a package: load the sibling by path.
_spec = importlib.util.spec_from_file_location(
    "hostcheck_copy_helpers", os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostcheck_copy.py"))
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
attributes = _helpers.attributes
recorded_state = _helpers.recorded_state
octal = _helpers.octal

STRIP = re.compile(r"^([ugoa]+)-([rwx]+)$")
SHIFT = {"u": (6,), "g": (3,), "o": (0,), "a": (6, 3, 0)}
BITS = {"r": 4, "w": 2, "x": 1}
DIRECTORY_ARGS = {"path", "state", "mode", "owner", "group"}
"""What hostcheck_write takes for a directory; a task asking for anything else goes to the builtin."""


def strip_mask(mode):
    """The permission bits a mode like "g-w,o-rwx" removes, or None for any other mode."""
    if not isinstance(mode, str):
        return None
    mask = 0
    for clause in mode.split(","):
        match = STRIP.match(clause.strip())
        if not match:
            return None
        bits = sum(BITS[b] for b in set(match.group(2)))
        for who in match.group(1):
            for shift in SHIFT[who]:
                mask |= bits << shift
    return mask


def already_stripped(args, recorded):
    """True when the recorded directory has none of the bits a strip-only mode removes."""
    mask = strip_mask(args.get("mode"))
    if mask is None or args.get("owner") is not None or args.get("group") is not None:
        return False
    fields = (recorded or "").split()
    if len(fields) != 5 or fields[:2] != ["dir", "-"] or not re.match(r"^[0-7]{3,4}$", fields[2]):
        return False
    return int(fields[2], 8) & mask == 0


class ActionModule(ActionBase):

    def run(self, tmp=None, task_vars=None):
        args = dict(self._task.args)
        attrs = attributes(args)
        if args.get("state") == "directory" and not args.get("recurse"):
            recorded = recorded_state(task_vars, args.get("path"))
            if (attrs is not None and recorded == "dir - " + attrs) or already_stripped(args, recorded):
                return {"changed": False, "path": args["path"], "state": "directory",
                        "msg": "already as wanted when the role recorded it"}
            # Absent or a plain directory with other attributes when recorded: one JSON-args call.
            if (attrs is not None and set(args) <= DIRECTORY_ARGS
                    and (recorded == "absent" or (recorded or "").startswith("dir "))):
                write = {"dest": args["path"], "state": "directory", "owner": args["owner"], "group": args["group"],
                         "mode": octal(args["mode"])}
                return self._execute_module(module_name="hostcheck_write", module_args=write, task_vars=task_vars)
        return self._execute_module(module_name="ansible.legacy.file", module_args=args, task_vars=task_vars)
