# -*- coding: utf-8 -*-
# Copyright: hostcheck contributors
# Apache-2.0
"""Load Jinja's filter and test plugins once, before Ansible forks a worker for each task."""

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Load the filter and test plugins once per run instead of once per task
description:
  - Ansible runs each task in a process forked from the controller. The first filter or test a
    task uses makes that process scan and import every filter and test plugin, about 5 ms of
    CPU per task on a small machine, because the controller itself has not done it before
    forking. This callback does it once when the playbook starts, so every task inherits the
    result. It changes nothing else and prints nothing.
  - Enable it with C(callbacks_enabled = hostcheck.host_profile.preload) in C(ansible.cfg) (the
    repository's own C(ansible.cfg) enables it for runs from a clone).
author: hostcheck contributors
"""

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader, test_loader


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "hostcheck.host_profile.preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        # Asking for one plugin of each kind by its builtin name indexes them all.
        for loader, name in ((filter_loader, "ansible.builtin.quote"), (test_loader, "ansible.builtin.match")):
            try:
                loader.get(name)
            except Exception as exc:  # only an optimisation: never fail a run over it
                self._display.vvv("preload: %s: %s" % (name, exc))
