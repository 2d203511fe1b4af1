# -*- coding: utf-8 -*-
# Copyright: hostcheck contributors
# Apache-2.0
"""ansible.builtin.copy with inline content, without touching the host when it already has it.

A rerun of the profile is mostly files that are already right, and each copy costs two calls to
the host (stat with checksum, then file attributes). The role's hostcheck_manifest record, which
runs before its first change anyway, returns the state of the paths it records as the fact
hostcheck_files_now ("file SHA1 MODE OWNER GROUP"). When the content, mode, owner and group
asked for here equal that state, this action answers "ok" from the controller; otherwise
(absent, different, not recorded, symbolic mode, backup, remote_src) it is
ansible.builtin.copy itself. hostcheck_directory does the same for ansible.builtin.file with
state=directory.

When the record shows the file absent or different, and the task asks for nothing beyond
content, mode, owner, group and validate, it is written by the module hostcheck_write in one call
instead of the copy's three, with the same before and after under --diff.

A template is named with template: NAME instead of content, and rendered here by the
ansible.builtin.template lookup with the task's variables, so the text compared is the text
written. The lookup deep-copies every variable before each render (0.14 s a file on the bench's
controller, 1.5 s of a rerun); here it gets a shallow copy. The deep copy only
guards the variables against a template that changes them, in a worker process that ends with
the task.

The state is the one the record read, before the role changed anything: a role that wrote a
path twice between two records, the second time back to what it was, would have that second
write skipped. No role does; a role that needs it records the path again in between.
"""

from __future__ import annotations

import hashlib
import os
import re

from ansible.plugins.action import ActionBase

OCTAL_MODE = re.compile(r"^0?[0-7]{3,4}$")
WRITE_ARGS = {"dest", "content", "mode", "owner", "group", "validate"}
"""What hostcheck_write takes; a task asking for anything else goes to ansible.builtin.copy."""


def octal(mode):
    """The task's mode as hostcheck_write takes it (YAML may have made 0644 an int)."""
    return "%o" % mode if isinstance(mode, int) else str(mode)


def attributes(args):
    """"MODE OWNER GROUP" as the manifest writes them, or None when mode, owner or group is
    missing or the mode is symbolic (the outcome then depends on the host)."""
    mode, owner, group = args.get("mode"), args.get("owner"), args.get("group")
    if mode is None or owner is None or group is None:
        return None
    mode = octal(mode)
    if not OCTAL_MODE.match(mode):
        return None
    return "%04o %s %s" % (int(mode, 8), owner, group)


def recorded_state(task_vars, path):
    """The path's state when the role's last record read it (the module keys it normalised)."""
    known = ((task_vars or {}).get("ansible_facts") or {}).get("hostcheck_files_now") or {}
    return known.get(os.path.normpath(path)) if isinstance(path, str) else None


class ShallowOnDeepcopy(dict):
    """Task variables that the template lookup copies shallowly (see the module's docstring)."""

    def __deepcopy__(self, memo):
        return dict(self)


class ActionModule(ActionBase):
    TRANSFERS_FILES = True

    def rendered(self, name, task_vars):
        lookup = self._shared_loader_obj.lookup_loader.get(
            "ansible.builtin.template", loader=self._loader, templar=self._templar)
        return lookup.run([name], variables=ShallowOnDeepcopy(task_vars or {}))[0]

    def run(self, tmp=None, task_vars=None):
        args = self._task.args
        if "template" in args:
            if "content" in args or "src" in args:
                return {"failed": True, "msg": "hostcheck_copy: template cannot be combined with content or src"}
            args = {k: v for k, v in args.items() if k != "template"}
            args["content"] = self.rendered(self._task.args["template"], task_vars)
            self._task.args = args
        content, attrs = args.get("content"), attributes(args)
        if (isinstance(content, str) and attrs is not None
                and not (args.get("backup") or args.get("remote_src") or args.get("src"))):
            digest = hashlib.sha1(content.encode("utf-8", "surrogateescape")).hexdigest()
            state = recorded_state(task_vars, args.get("dest"))
            if state == "file %s %s" % (digest, attrs):
                return {"changed": False, "dest": args["dest"], "checksum": digest,
                        "msg": "already as wanted when the role recorded it"}
            if (state is not None and (state == "absent" or state.startswith("file "))
                    and set(args) <= WRITE_ARGS):
                write = dict(args, mode=octal(args["mode"]))
                return self._execute_module(module_name="hostcheck_write", module_args=write, task_vars=task_vars)
        copy = self._shared_loader_obj.action_loader.get(
            "ansible.legacy.copy", task=self._task, connection=self._connection,
            play_context=self._play_context, loader=self._loader, templar=self._templar,
            shared_loader_obj=self._shared_loader_obj)
        return copy.run(tmp=tmp, task_vars=task_vars)
