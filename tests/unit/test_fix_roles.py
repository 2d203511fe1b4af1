"""Findings name the Ansible role and variable that fix them: those must exist in roles/."""

from __future__ import annotations

import yaml

from hostcheck.checks import load_registry
from tests.helpers import REPO


def test_every_fix_role_names_a_documented_role_variable() -> None:
    for check_id, meta in load_registry().items():
        if not meta.fix_role:
            continue
        role, _, variable = meta.fix_role.partition(": ")
        specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
        options = specs["argument_specs"]["main"]["options"]
        assert variable in options, f"{check_id}: {role} has no documented variable {variable}"
