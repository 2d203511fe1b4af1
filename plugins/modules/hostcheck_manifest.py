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
    choices: [record, finalize_packages, hold, rollback, status, cleanup]
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
    - For record, the enablement and activity of each of I(units) and I(read_units) now, as
      C({"enabled": ..., "active": ...}) (what C(systemctl is-enabled) and C(is-active) print;
      C(not-found) when it prints nothing), so a role needs no command of its own to read them.
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

import os
import shutil

from ansible.module_utils.basic import AnsibleModule

# Each kind of entry is a class in module_utils, with its record and its undo side by side.
# From a clone they are rollback_manifest's role-local module_utils (ansible.module_utils.*);
# from the installed collection, its plugins/module_utils. Ansible bundles an import inside
# try as optional, so each run ships whichever of the two it finds.
try:
    from ansible.module_utils.hostcheck_manifest_kinds import PACKAGES, hold, record, rollback
    from ansible.module_utils.hostcheck_manifest_state import Manifest, file_summary, unit_state
except ImportError:
    from ansible_collections.hostcheck.host_profile.plugins.module_utils.hostcheck_manifest_kinds import (
        PACKAGES,
        hold,
        record,
        rollback,
    )
    from ansible_collections.hostcheck.host_profile.plugins.module_utils.hostcheck_manifest_state import (
        Manifest,
        file_summary,
        unit_state,
    )

ACTIONS = ["record", "finalize_packages", "hold", "rollback", "status", "cleanup"]


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
        result["recorded"], result["absent_packages"] = rec.recorded, rec.absent_packages
        result["packages_pending"] = rec.packages_pending
        if rec.recorded and not module.check_mode:
            manifest.save()
    elif action == "finalize_packages":
        result["recorded"] = PACKAGES.finalize(module, manifest, role, module.params["packages"])
        if result["recorded"] and not module.check_mode:
            manifest.save()
    elif action == "hold":
        result["recorded"], result["held"] = hold(module, manifest, role)
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
        required_if=[("action", a, ("role",)) for a in ("record", "finalize_packages", "hold", "rollback")],
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
        result["units_now"] = {unit: unit_state(module, unit)
                               for unit in module.params["units"] + module.params["read_units"]}
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
