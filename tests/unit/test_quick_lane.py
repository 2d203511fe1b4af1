"""`./scripts/test --quick` is the unit lane: it leaves out every marker that puts a test in a
lab lane (tests/lab/lanes.py), and nothing else."""

from __future__ import annotations

import re

from tests.helpers import REPO
from tests.lab.lanes import LAB_MARKERS


def test_the_quick_lane_leaves_out_the_lab_lanes_and_nothing_else() -> None:
    script = (REPO / "scripts" / "test").read_text(encoding="utf-8")
    (expression,) = re.findall(r'lane=\(-m "([^"]+)"\)', script)
    terms = expression.split(" and ")
    assert all(re.fullmatch(r"not \w+", term) for term in terms), expression
    assert sorted(term.removeprefix("not ") for term in terms) == sorted(["vm", *LAB_MARKERS])
