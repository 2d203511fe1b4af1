# -*- coding: utf-8 -*-
# Copyright: hostcheck contributors
# Apache-2.0
"""ansible.builtin.file with state=directory, answered from the controller when the role's
manifest record found the directory already with this mode, owner and group (see
hostcheck_copy, whose helpers it shares)."""

from __future__ import annotations

import importlib.util
import os

from ansible.plugins.action import ActionBase

# Ansible loads each action plugin file on its own, not as a package: load the sibling by path.
_spec = importlib.util.spec_from_file_location(
    "hostcheck_copy_helpers", os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostcheck_copy.py"))
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
attributes = _helpers.attributes
recorded_state = _helpers.recorded_state


class ActionModule(ActionBase):

    def run(self, tmp=None, task_vars=None):
        args = dict(self._task.args)
        attrs = attributes(args)
        if args.get("state") == "directory" and attrs is not None and not args.get("recurse"):
            if recorded_state(task_vars, args.get("path")) == "dir - " + attrs:
                return {"changed": False, "path": args["path"], "state": "directory",
                        "msg": "already as wanted when the role recorded it"}
        return self._execute_module(module_name="ansible.legacy.file", module_args=args, task_vars=task_vars)
