"""Property tests with hostile values: whatever the facts, policy or fleet reports hold, the CLI
answers with a report or a clear usage error (never exit 1, never a traceback), and --redact
never lets an identifying value through, in any format.

The CLI runs in-process (typer's runner) so that each of the hundreds of examples costs
milliseconds; tests/unit/test_bad_input.py runs the real process on the named cases.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hostcheck.cli import app
from hostcheck.facts import from_jsonable
from hostcheck.policy import load_shipped
from hostcheck.redact import SUBSTITUTE_PUBLIC_RANGES, redacted_report
from hostcheck.render import render
from hostcheck.report import build_report
from tests.helpers import SNAPSHOTS

SNAPSHOT_NAMES = ("reference-laptop", "dedicated-4090", "no-nvidia-desktop")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------ hostile values

CONTROL_TEXT = st.text(st.characters(codec="utf-8", categories=["Cc", "Cf", "Zs", "L", "N", "P"]), max_size=40)


def _v6_notation(address: ipaddress.IPv6Address, how: int) -> str:
    return [address.compressed, address.exploded, address.compressed.upper(), f"{address.compressed}%eth0",
            f"[{address.compressed}]:22"][how]


IPV6_TEXT = st.builds(_v6_notation, st.ip_addresses(v=6), st.integers(0, 4))
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0, -1, 2**63, 1e308]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, CONTROL_TEXT, IPV6_TEXT, st.just({"$unknown": "x\x1b[2J"}))
HOSTILE = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(CONTROL_TEXT, inner, max_size=4)),
    max_leaves=12,
)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": [value]}
    return value


HOSTILE_OR_DEEP = st.one_of(HOSTILE, st.integers(1, 200).map(_nested))


@cache
def _snapshot(name: str) -> str:
    return (SNAPSHOTS / f"{name}.json").read_text()


def _slots(tree: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) of a JSON tree: the places a hostile value can go."""
    found: list[tuple[Any, Any]] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for key, child in items:
            found.append((node, key))
            stack.append(child)
    return found


def _mutate(data: st.DataObject, tree: Any, values: st.SearchStrategy[Any], at_most: int = 4) -> Any:
    tree = copy.deepcopy(tree)
    for _ in range(data.draw(st.integers(1, at_most))):
        slots = _slots(tree)
        container, key = slots[data.draw(st.integers(0, len(slots) - 1))]
        container[key] = copy.deepcopy(data.draw(values))  # st.just values are shared objects
    return tree


def _write(folder: Path, name: str, value: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps(value) if not isinstance(value, str) else value)  # NaN/Infinity allowed in: hostile
    return path


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"{type(result.exception).__name__}: {result.exception}\n{result.output[-2000:]}"
    assert "Traceback" not in result.output
    return result.exit_code, result.output


# ------------------------------------------------------------------ properties

@SETTINGS
@given(st.data(), st.sampled_from(SNAPSHOT_NAMES), st.sampled_from(["table", "json", "markdown"]), st.booleans())
def test_audit_of_hostile_facts_never_crashes(data: st.DataObject, name: str, fmt: str, redacted: bool) -> None:
    facts = _mutate(data, json.loads(_snapshot(name)), HOSTILE_OR_DEEP)
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), "facts.json", facts)
        code, _ = _run(["audit", "--facts", str(path), "-f", fmt, "-v", *(["--redact"] if redacted else [])])
    assert code != 1 and code in (0, 2, 3, 4)


POLICY_FIELDS = st.sampled_from(["threshold", "note", "severity", "check", "source", "id", "title", "summary"])


def _yaml_scalar(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, float) else repr(value).replace("nan", ".nan").replace("inf", ".inf")


@SETTINGS
@given(st.data(), POLICY_FIELDS, st.sampled_from(["GPU-1020", "PLAT-1010", "GPU-1060", "SYS-1050"]))
def test_hostile_policy_never_crashes(data: st.DataObject, field: str, check: str) -> None:
    value = data.draw(st.one_of(HOSTILE, st.just("*a"), st.just("[*a, *a, *a]"), st.just("&b [1, *b]")))
    text = (
        "format: 1\nid: mine\ntitle: t\nplatform: p\nkind: platform\nsummary: s\n"
        "sources: {doc: {url: 'https://github.com/o/r/blob/0123abc/p.md', checked: 2026-11-29, title: t, status: published, quote: q}}\n"
        "anchors: &a [1, 2]\n"
        f"requirements:\n  - check: {check}\n    severity: blocker\n    threshold: 12\n    source: doc\n"
    )
    rendered = value if isinstance(value, str) and value[:1] in "*&[" else _yaml_scalar(value)
    text = re.sub(rf"(?m)^(\s*){field}: .*$", lambda m: f"{m.group(1)}{field}: {rendered}", text, count=1)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mine.yaml"
        path.write_text(text)
        code, _ = _run(["audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--policy", str(path)])
    assert code in (0, 2, 3, 4)


@cache
def _report() -> dict[str, Any]:
    facts = from_jsonable(json.loads(_snapshot("dedicated-4090")))
    return build_report(facts, [load_shipped("vast"), load_shipped("salad")]).as_dict()


@SETTINGS
@given(st.data(), st.integers(1, 3), st.sampled_from(["table", "json", "markdown"]))
def test_fleet_of_hostile_reports_never_crashes(data: st.DataObject, count: int, fmt: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        _write(Path(folder), "good.json", _report())
        for index in range(count):
            _write(Path(folder), f"bad{index}\x1b.json", _mutate(data, _report(), HOSTILE_OR_DEEP, at_most=2))
        code, output = _run(["fleet", folder, "-f", fmt])
        assert code in (0, 2)
        assert "good" in output  # the intact host is always shown
        diff_code, _ = _run(["fleet", "diff", folder, folder, "-f", fmt])
        assert diff_code in (0, 2)


# ------------------------------------------------------------------ --redact never leaks

# Distinctive names, searched for as bare words below. Short and common names (x, ubuntu) are
# user names only where the facts say so: tests/unit/redact/test_redact.py searches for them in context.
NAMES = st.builds(lambda a: f"zqu{a}", st.text("qxzjk", min_size=1, max_size=6))
HOSTS = st.builds(lambda a, b: f"zq{a}-{b}", st.text("qxzjk", min_size=1, max_size=5), st.integers(0, 99))


# Blocks named in policy text (100.64.0.0/10) or, as the public blocks of redacted facts, in
# network.path.public_ranges (192.0.2.0/24, 2001:db8::/32): these names are not this host's.
BLOCK_NAMES = {"10.0.0.0", "172.16.0.0", "192.168.0.0", "100.64.0.0", "169.254.0.0", "fc00::", "fe80::",
               "192.0.2.0", "198.51.100.0", "203.0.113.0", "198.18.0.0", "2001:db8::"}


def _identifies(address: Any) -> bool:
    """Loopback, unspecified, multicast and broadcast addresses (in any notation) are kept by design:
    every host has them or every network uses them alike."""
    mapped = getattr(address, "ipv4_mapped", None)
    if str(address) in BLOCK_NAMES:  # policy text names these blocks (100.64.0.0/10): not this host's
        return False
    if any(address in ipaddress.ip_network(block) for block in SUBSTITUTE_PUBLIC_RANGES):
        return False  # redaction writes its placeholders there: 192.0.2.1 may be one, not a leak
    return not (address.is_loopback or address.is_unspecified or address.is_multicast
                or str(address) == "255.255.255.255" or (mapped is not None and not _identifies(mapped)))


PUBLIC_V4 = st.ip_addresses(v=4).filter(_identifies)
PUBLIC_V6 = st.ip_addresses(v=6).filter(_identifies)
MACS = st.lists(st.integers(0, 255), min_size=6, max_size=6).map(lambda b: ":".join(f"{x:02x}" for x in b))
UUIDS = st.uuids().map(str)


def _plant(facts: dict[str, Any], user: str, other: str, host: str, v4: Any, v6: Any, how: int, mac: str,
           uuid: str, nas: str) -> None:
    v6_text = _v6_notation(v6, how)
    facts["meta"]["hostname"] = host
    facts["isolation"]["human_accounts"] = [{"name": user, "uid": 1000, "home": f"/home/{user}", "shell": "/bin/sh"}]
    facts["isolation"]["sudo_group_members"] = [user]
    facts["ssh"] = {"installed": True, "running": True, "source": "sshd -T", "settings": {
        "passwordauthentication": "no", "allowusers": [f"{other}@{v4}", user], "listenaddress": [f"[{v6.compressed}]:22"],
    }}
    network = facts.setdefault("network", {})
    network["interfaces"] = [{"name": "eth0", "mac": mac, "up": True, "kind": "wired",
                              "addresses": [{"address": v6_text, "family": 6}, {"address": str(v4), "family": 4}]}]
    network["nat"] = {"mapped_address": str(v4), "server": f"{nas}.example:3478"}
    network["cgnat"] = {"signals": [{"name": "x", "result": "nat", "evidence": f"mapped {v4} and {v6_text} to {host}"}]}
    facts.setdefault("storage", {})["filesystems"] = [
        {"device": f"/dev/mapper/luks-{uuid}", "mountpoint": "/", "encrypted": True},
        {"device": f"{nas}:/export", "mountpoint": f"/home/{user}/models", "encrypted": False},
    ]


def _leaked(text: str, values: list[str]) -> list[str]:
    return [v for v in values if re.search(rf"(?<![\w.:-]){re.escape(v)}(?![\w:-])", text, re.IGNORECASE)]


@SETTINGS
@given(NAMES, NAMES, HOSTS, PUBLIC_V4, PUBLIC_V6, st.integers(0, 4), MACS, UUIDS, HOSTS, st.sampled_from(SNAPSHOT_NAMES))
def test_redact_never_leaks(user: str, other: str, host: str, v4: Any, v6: Any, how: int, mac: str, uuid: str,
                            nas: str, name: str) -> None:
    facts = json.loads(_snapshot(name))
    _plant(facts, user, other, host, v4, v6, how, mac, uuid, nas)
    secrets = [user, other, host, str(v4), v6.compressed, v6.exploded, _v6_notation(v6, how), mac, uuid, nas]
    policies = [load_shipped("vast")]
    report = build_report(from_jsonable(facts), policies)
    assert _leaked(json.dumps(report.as_dict()), secrets)  # planted
    redacted, changed = redacted_report(from_jsonable(facts), policies, report)
    assert changed == []
    for fmt in ("json", "table", "markdown"):
        assert _leaked(render(redacted, fmt, verbose=True), secrets) == [], fmt
