"""A blocker rests on a sentence that states what it enforces, or says it is hostcheck's own choice.

The rules that can be read off the data, held for every shipped policy:
- a blocker's number (its threshold, or each number in a list or version threshold) is in its
  quote, as written or as the GiB that a quoted GB figure comes to;
- a blocker's quote is not advice ("you will probably want to", "it is recommended");
- a blocker on a free-space check cites a sentence about free space (capacity is another check);
unless the requirement says why hostcheck chose it (`own_choice`) or the quote is a recorded
paraphrase that says so (`paraphrase: true`). What cannot be read off the data (that a sentence
about open ports is not about the operating system) is for the reviewer of each source.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.errors import PolicyError
from hostcheck.models import Policy, Severity
from hostcheck.policy import load_shipped, parse_policy, shipped_policy_names

GIB_PER_GB = 1e9 / 2**30
NUMBER = re.compile(r"\d+(?:\.\d+)?")
# Words of a sentence that advises rather than requires ("8 GB recommended" beside a requirement
# is an aside, not advice about the requirement, so a bare "recommended" is not among them).
ADVICE = re.compile(r"\b(probably|it is recommended|we recommend|might want|may want|you can add|consider)\b",
                    re.IGNORECASE)
# Checks that measure free space: a sentence about the size of a disk is another check's.
FREE_SPACE = {"STO-1010", "STO-1050", "STO-1060"}


def _numbers(threshold: Any) -> list[float]:
    """The numbers a threshold names. A count of one (at least one GPU, one open port) is said in
    words ("an NVIDIA GPU", "open ports"), so it is not looked for."""
    if isinstance(threshold, bool) or threshold is None:
        return []
    if isinstance(threshold, (int, float)):
        values = [float(threshold)]
    elif isinstance(threshold, list):
        values = [float(n) for item in threshold for n in NUMBER.findall(str(item))]
    elif re.fullmatch(r"\d+(?:\.\d+)*", str(threshold)):  # a version: 11.8, 550.54.15
        return [float(threshold)] if str(threshold).count(".") <= 1 else []
    else:
        return []  # a sentence (PLAT-1010) or a name (AGT-1030): nothing numeric to find
    return [v for v in values if v not in (0.0, 1.0)]


def _stated(value: float, quote: str) -> bool:
    """The quote names the value, or a GB figure in it comes to the value in GiB (rounded down
    to the policy's precision: 256 GB is 238.4 GiB, written 238)."""
    quoted = [float(n) for n in NUMBER.findall(quote.replace(",", ""))]
    for number in quoted:
        if math.isclose(number, value):
            return True
        gib = number * GIB_PER_GB
        if value <= gib and gib - value < 1:
            return True
    return False


def problems(policy: Policy) -> list[str]:
    """What breaks the rules above, one line per requirement and rule."""
    out = []
    for req in policy.requirements:
        if req.level is not None or req.severity != Severity.BLOCKER or req.own_choice or req.source.paraphrase:
            continue
        where = f"{policy.id} {req.check}"
        missing = [v for v in _numbers(req.threshold) if not _stated(v, req.source.quote)]
        if missing:
            out.append(f"{where}: the quote does not state {', '.join(f'{v:g}' for v in missing)}")
        if ADVICE.search(req.source.quote):
            out.append(f"{where}: the quote advises ({ADVICE.search(req.source.quote).group(0)!r}), it does not require")
        if req.check in FREE_SPACE and "free" not in req.source.quote.lower():
            out.append(f"{where}: a free-space check on a sentence that does not speak of free space")
    return out


@pytest.mark.parametrize("name", shipped_policy_names())
def test_every_blocker_quotes_what_it_enforces_or_says_it_is_hostchecks_choice(name: str) -> None:
    assert problems(load_shipped(name)) == []


def _requirement(policy_text: str) -> list[str]:
    return problems(parse_policy(policy_text, "t.yaml"))


POLICY = """format: 1
id: t
title: t
platform: t
kind: platform
summary: t
sources:
  s:
    title: a page
    url: https://github.com/o/r/blob/0123abc/page.md
    checked: 2026-12-07
    status: published
    quote: {quote}
{extra}requirements:
  - {{check: {check}, severity: blocker, threshold: {threshold}, source: s{more}}}
"""


@pytest.mark.parametrize(("check", "threshold", "quote", "extra", "more", "expected"), [
    # The number is there as written, or as GiB of a quoted GB figure.
    ("SYS-1110", 11.1, '"12 GB RAM"', "", "", []),
    ("STO-1120", 238, '"256 GB SSD"', "", "", []),
    ("GPU-1030", '"12.4"', '"| CUDA | Version 12.4 or later |"', "", "", []),
    ("SYS-1050", '["debian 12", "debian 13"]', '"packages for debian/12 and debian/13"', "", "", []),
    # It is not: a sentence about something else.
    ("SYS-1110", 11.1, '"NVIDIA GeForce RTX 30xx or newer"', "", "", ["t SYS-1110: the quote does not state 11.1"]),
    ("SYS-1050", '["debian 12", "debian 13"]', '"Debian 12 (bookworm)"', "", "", ["t SYS-1050: the quote does not state 13"]),
    # ... unless the requirement says it is hostcheck's own choice, or the quote says it is a paraphrase.
    ("SYS-1110", 11.1, '"NVIDIA GeForce RTX 30xx or newer"', "", ", own_choice: why", []),
    ("SYS-1110", 11.1, '"12 gigs or so"', "    paraphrase: true\n", "", []),
    # Advice behind a blocker; a free-space check on a sentence about capacity.
    ("STO-1010", 119, '"you will probably want 128GB"', "", "", ["t STO-1010: the quote advises ('probably'), it does not require",
                                                                 "t STO-1010: a free-space check on a sentence that does not speak of free space"]),
    ("STO-1010", 119, '"at least 128GB free"', "", "", []),
])
def test_the_rules_catch_what_they_say(check: str, threshold: Any, quote: str, extra: str, more: str,
                                       expected: list[str]) -> None:
    text = POLICY.format(check=check, threshold=threshold, quote=quote, extra=extra, more=more)
    assert _requirement(text) == expected


def test_a_source_read_in_a_pull_request_is_never_published() -> None:
    text = POLICY.format(check="SYS-1110", threshold=11.1, quote='"12 GB RAM"',
                         extra="    pull: https://github.com/o/r/pull/603\n", more="")
    with pytest.raises(PolicyError, match=r"a page read in a pull request is a draft, never published"):
        parse_policy(text, "t.yaml")


def test_the_platforms_the_issue_names_rest_on_sentences_that_state_them() -> None:
    """`hostcheck explain` of each Quickpod, io.net, Runpod, Darkbloom and Salad requirement
    shows its quote; each blocker's quote is the platform's sentence for it (or a marked
    paraphrase), and no two of Quickpod's requirements on different subjects share one."""
    quickpod = {r.check: r for r in load_shipped("quickpod").requirements}
    assert "Ubuntu" in quickpod["SYS-1050"].source.quote and "NVIDIA drivers" in quickpod["GPU-1010"].source.quote
    for check in ("NET-1030", "NET-1040", "NET-1120"):
        assert "open ports" in quickpod[check].source.quote
    assert "100% uptime" in quickpod["PWR-1030"].source.quote
    assert "auto-updates" in quickpod["PKG-1020"].source.quote
    ionet = {r.check: r for r in load_shipped("ionet").requirements}
    assert ionet["SYS-1110"].source.paraphrase and "12 GB" in ionet["SYS-1110"].source.quote
    assert ionet["STO-1120"].source.paraphrase and "256 GB" in ionet["STO-1120"].source.quote
    darkbloom = {r.check: r for r in load_shipped("darkbloom").requirements}
    assert darkbloom["SYS-1050"].threshold == ["macos 15+"] and "macOS 15+" in darkbloom["SYS-1050"].source.quote
    runpod = {r.check: r for r in load_shipped("runpod").requirements}
    assert "98%" in runpod["REL-1020"].source.quote and runpod["REL-1020"].source.withdrawn == "2026-04-01"
    salad = {r.check: r for r in load_shipped("salad-linux").requirements}
    assert salad["SYS-1050"].threshold == ["debian 12", "debian 13"]
    registry = load_registry()
    for name in ("quickpod", "ionet", "runpod", "darkbloom", "salad", "salad-linux"):
        policy = load_shipped(name)
        assert problems(policy) == [], name
        assert all(req.check in registry and req.source.quote.strip() for req in policy.requirements), name
    # Quickpod's requirements no longer share one sentence about open ports.
    assert len({r.source.quote for r in quickpod.values()}) >= 5


def test_a_recorded_claim_is_marked_a_paraphrase_wherever_it_is_shown() -> None:
    """A quote kept as it was recorded, because the page could not be re-read, says so: in its
    source (`paraphrase: true`), in `hostcheck explain` and in docs/sources.md."""
    import sys

    from typer.testing import CliRunner

    from hostcheck.cli import app
    from tests.helpers import REPO

    sys.path.insert(0, str(REPO / "scripts"))
    import gen_sources_doc

    rows = gen_sources_doc.collected()
    for file, key, source, _ in rows:
        if re.search(r"could not be re-read|as recorded", source.note):
            assert source.paraphrase, (file, key)
    paraphrases = [row for row in rows if row[2].paraphrase]
    assert len(paraphrases) >= 12
    assert gen_sources_doc.render().count("| *paraphrase:* ") == len(paraphrases)
    out = CliRunner().invoke(app, ["explain", "SYS-1110"], env={"COLUMNS": "200"}).output
    assert 'paraphrase, not the page\'s words: "12 GB RAM"' in out


def test_tensordock_explains_why_a_personal_machine_cannot_host() -> None:
    from typer.testing import CliRunner

    from hostcheck.cli import app

    out = CliRunner().invoke(app, ["explain", "ISO-1010"], env={"COLUMNS": "200"}).output
    block = out[out.index("  - tensordock: "):]
    assert block.split()[2].rstrip(",;") == "blocker"
    assert "vfio-pci" in block and "snd_hda_intel" in block and "passwordless sudo" in block
    assert "options vfio-pci ids=${IDS}" in block
