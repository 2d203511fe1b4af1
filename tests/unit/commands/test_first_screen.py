"""The owner's first screen: at most 40 lines at the terminal's width, no trailing spaces, no
line printed twice; golden screens for five host shapes at 80 and 120 columns; the plan names
real role variables, and what it claims to clear is cleared when the fixed facts are judged.

Golden screens are written by the tool (HOSTCHECK_REGENERATE_GOLDEN=1) and reviewed by hand;
the assertions below are computed from the rules, not from the golden files.
"""

from __future__ import annotations

import copy
import datetime as dt
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcheck.facts import Unknown, load_snapshot
from hostcheck.models import Report, Status
from hostcheck.policy import load_shipped, shipped_policy_names
from hostcheck.render import render
from hostcheck.render.markdown_escape import markdown_tree
from hostcheck.render.table import render_table
from hostcheck.report import build_report
from hostcheck.rules_age import STALE_AFTER_DAYS, newest_read
from tests.helpers import REPO, SNAPSHOTS

GOLDEN = REPO / "tests" / "golden" / "screens"
SHAPES = {
    "reference-laptop": "the reference laptop",
    "rtx3090-vram-in-use": "a dedicated RTX 3090 box",
    "mac-mini-m2-sonoma": "a Mac",
    "vm-guest-virtio-4090": "a VM",
    "gpu-less-live": "this GPU-less machine's live facts",
}
LIMIT = 23  # an 80x24 terminal with the prompt


@cache
def policies() -> list[Any]:
    return [load_shipped(name) for name in shipped_policy_names() if name != "owner-risk"]


@cache
def release_day() -> dt.datetime:
    """The day the shipped rules were last read: the golden screens are rendered on it, so they
    do not change with the clock."""
    day = newest_read(load_shipped(name) for name in shipped_policy_names())
    assert day is not None
    return dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)


def screen(facts: dict[str, Any], width: int, now: dt.datetime | None = None) -> str:
    return render_table(render_escape(build_report(facts, policies(), now or release_day())), width=width)


def render_escape(report: Report) -> Report:
    from hostcheck.render.escape import escape_tree

    return escape_tree(report)


def assert_fits(text: str, width: int, where: str) -> None:
    lines = text.rstrip("\n").split("\n")
    assert len(lines) <= LIMIT, f"{where}: {len(lines)} lines"
    for line in lines:
        assert len(line) <= width, f"{where}: {line!r} is {len(line)} wide"
        assert line == line.rstrip(), f"{where}: {line!r} ends in spaces"
    said = [line for line in lines if line.strip()]
    twice = {line for line in said if said.count(line) > 1}
    assert not twice, f"{where}: printed twice: {twice}"


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_golden_first_screen(shape: str, width: int) -> None:
    text = screen(load_snapshot(SNAPSHOTS / f"{shape}.json"), width)
    assert_fits(text, width, f"{shape} at {width}")
    golden = GOLDEN / f"{shape}-{width}.txt"
    if os.environ.get("HOSTCHECK_REGENERATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), f"{SHAPES[shape]}: the first screen changed; regenerate with scripts/regen"


@pytest.mark.parametrize("snapshot", sorted(SNAPSHOTS.glob("*.json")), ids=lambda p: p.stem)
def test_every_shipped_snapshot_fits_at_80_columns(snapshot: Path) -> None:
    assert_fits(screen(load_snapshot(snapshot), 80), 80, snapshot.stem)


HOSTILE = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=300)


def _flip_all(node: Any, draw_bool: Any) -> Any:
    if isinstance(node, bool):
        return draw_bool()
    if isinstance(node, dict):
        return {k: _flip_all(v, draw_bool) for k, v in node.items()}
    if isinstance(node, list):
        return [_flip_all(v, draw_bool) for v in node]
    return node


@st.composite
def generated_facts(draw: Any) -> dict[str, Any]:
    """A shipped host shape with booleans redrawn, whole sections unknown and a hostile host name."""
    name = draw(st.sampled_from(sorted(p.stem for p in SNAPSHOTS.glob("*.json"))))
    facts = copy.deepcopy(load_snapshot(SNAPSHOTS / f"{name}.json"))
    facts = _flip_all(facts, lambda: draw(st.booleans()))
    for section in draw(st.sets(st.sampled_from(sorted(k for k in facts if k != "meta")), max_size=4)):
        facts[section] = Unknown("removed by the test")
    facts["meta"]["hostname"] = draw(HOSTILE)
    return facts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(facts=generated_facts(), width=st.sampled_from([80, 120]))
def test_every_generated_first_screen_fits(facts: dict[str, Any], width: int) -> None:
    assert_fits(screen(facts, width), width, "generated facts")


def test_the_rules_date_is_said_once_and_their_age_from_90_days_on() -> None:
    """Every screen says when the rules were read (the oldest date a cited source was read); from
    STALE_AFTER_DAYS on, one line under the headline says so with what to do instead."""
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    every = [load_shipped(name) for name in shipped_policy_names()]  # the owner-risk set is judged too
    oldest = min(r.source.checked for p in every for r in p.requirements)
    read = dt.datetime.fromisoformat(oldest).replace(tzinfo=dt.UTC)
    for days, stale in ((0, False), (STALE_AFTER_DAYS - 1, False), (STALE_AFTER_DAYS, True), (400, True)):
        text = screen(facts, 80, read + dt.timedelta(days=days, hours=23))
        assert_fits(text, 80, f"{days} days after the reading")
        said = [line for line in text.splitlines() if oldest in line]
        assert len(said) == 1, text
        warning = f"Platform rules read {oldest} ({days} days ago) may be outdated: update hostcheck."
        assert (said[0] == warning) is stale, said
        if not stale:
            assert said[0].endswith(f"Platform rules read {oldest}."), said
            assert "outdated" not in text
        else:  # under the headline, above the policy table
            lines = text.splitlines()
            assert lines.index(warning) < lines.index(next(line for line in lines if line.startswith("policy ")))
        markdown = render(build_report(facts, policies(), read + dt.timedelta(days=days)), "markdown")
        assert f"platform rules read {oldest}" in markdown.splitlines()[2]
        assert (warning in markdown) is stale


def test_markdown_says_the_same_answer() -> None:
    report = build_report(load_snapshot(SNAPSHOTS / "reference-laptop.json"), policies())
    markdown = " ".join(render(report, "markdown").split())
    answer = markdown_tree(report.answer)  # values reach Markdown escaped (render/markdown_escape.py)
    assert " ".join(answer.headline) in markdown
    assert answer.owner_risk in markdown


# ----------------------------------------------------------------------------- the plan


def role_defaults() -> dict[str, set[str]]:
    out = {}
    for defaults in (REPO / "roles").glob("*/defaults/main.yml"):
        out[defaults.parent.parent.name] = set(yaml.safe_load(defaults.read_text()) or {})
    return out


@pytest.mark.parametrize("snapshot", sorted(SNAPSHOTS.glob("*.json")), ids=lambda p: p.stem)
def test_plan_steps_name_real_role_variables(snapshot: Path) -> None:
    defaults = role_defaults()
    report = build_report(load_snapshot(snapshot), policies())
    for step in report.answer.plan:
        if step.role:
            assert step.variable in defaults.get(step.role, set()), f"{step.role}: {step.variable} is not in its defaults"
        assert step.clears, step


def test_a_manual_step_says_what_to_do() -> None:
    """A plan step done by hand is its check's fix up to the first full stop or semicolon outside
    an aside: that part must be the action, never "Nothing to configure" (a hardware limit names
    the new part)."""
    from hostcheck.answer import _short_fix
    from hostcheck.checks import load_registry

    for check_id, meta in load_registry().items():
        if not meta.fix_role:
            action = _short_fix(meta.fix)
            assert not action.lower().startswith(("nothing", "no ", "none")), (check_id, action)
            # never cut inside an aside or a command
            assert action.count("(") == action.count(")") and action.count("`") % 2 == 0, (check_id, action)


# What each role variable, once set, makes of the facts (the roles' own end state).
def _ssh_hardened(facts: dict[str, Any]) -> None:
    facts["ssh"]["settings"].update(passwordauthentication="no", kbdinteractiveauthentication="no",
                                     permitemptypasswords="no", permitrootlogin="prohibit-password")


def _docker_flag(key: str, value: bool) -> Any:
    def fix(facts: dict[str, Any]) -> None:
        facts["docker"][key] = value

    return fix


FIXED = {
    "ssh_hardening_enabled": _ssh_hardened,
    "ssh_hardening_permit_root_login": _ssh_hardened,
    "docker_host_no_new_privileges": _docker_flag("no_new_privileges", True),
    "docker_host_live_restore": _docker_flag("live_restore", True),
    "docker_host_icc": _docker_flag("icc", False),
    "docker_host_userland_proxy": _docker_flag("userland_proxy", False),
}


def test_what_a_step_claims_to_clear_is_cleared_when_the_fixed_facts_are_judged() -> None:
    facts = load_snapshot(SNAPSHOTS / "dedicated-4090.json")
    facts["ssh"]["settings"].update(passwordauthentication="yes", kbdinteractiveauthentication="yes")
    facts["docker"].update(icc=True, userland_proxy=True, no_new_privileges=False, live_restore=False)
    report = build_report(facts, policies())
    steps = [s for s in report.answer.plan if s.variable in FIXED]
    assert {s.variable for s in steps} >= {"ssh_hardening_enabled", "docker_host_icc", "docker_host_userland_proxy"}
    for step in steps:
        fixed = copy.deepcopy(facts)
        FIXED[step.variable](fixed)
        after = build_report(fixed, policies())
        still = {f.id for p in after.policies for f in p.findings if f.status in (Status.FAIL, Status.WARN)}
        still |= {r.id for r in after.owner_risk.findings if r.status == Status.WARN}
        assert not set(step.clears) & still, f"{step.action}: {set(step.clears) & still} still fail"


def test_no_hosting_step_while_owner_risk_is_high() -> None:
    report = build_report(load_snapshot(SNAPSHOTS / "reference-laptop.json"), policies())
    assert report.owner_risk.rating == "high"
    assert report.answer.plan and all(step.lowers is not None for step in report.answer.plan)
    assert "once owner risk is lower" in report.answer.plan_note
