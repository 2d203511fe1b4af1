"""Malformed policies and snapshots: each maps to its exact error, exit code 2, nothing crashes."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostcheck import safeio
from hostcheck.errors import FactsError, FileInputError, PolicyError
from hostcheck.facts import load_snapshot
from hostcheck.policy import parse_policy
from tests.helpers import SNAPSHOTS, hostcheck, run_cli

GOOD = """\
format: 1
id: mine
title: My policy
platform: Example
kind: platform
summary: Example policy.
sources:
  doc:
    url: https://github.com/example/docs/blob/0123abc/requirements.md
    checked: 2026-11-29
    title: Requirements
    status: published
    quote: "At least 12 GiB of VRAM."
requirements:
  - check: GPU-1020
    severity: blocker
    threshold: 12
    source: doc
"""

OWNER_RISK = GOOD.replace("kind: platform", "kind: owner-risk").replace(
    "  - check: GPU-1020\n    severity: blocker\n    threshold: 12\n", "  - check: OWN-1010\n    level: high\n"
)

BAD_POLICIES = [
    # (libyaml says "did not find expected ...", PyYAML's own parser "expected ..., but got ':'")
    ("bad YAML", GOOD.replace("kind: platform", "kind: [platform"), "line 6 column 8: invalid YAML: "),
    ("unknown top key", GOOD + "colour: red\n", "line 19: colour: unknown key"),
    ("unknown requirement key", GOOD + "    treshold: 3\n", "line 19: requirements[0].treshold: unknown key"),
    ("threshold of the wrong type", GOOD.replace("threshold: 12", "threshold: twelve"), "line 17: requirements[0].threshold: must be a number, not str 'twelve'"),
    ("boolean is not a number", GOOD.replace("threshold: 12", "threshold: true"), "requirements[0].threshold: must be a number, not bool True"),
    ("threshold without source", GOOD.replace("    source: doc\n", ""), "line 15: requirements[0].source: missing: every requirement cites its source"),
    ("source not declared", GOOD.replace("    source: doc\n", "    source: blog\n"), "line 18: requirements[0].source: 'blog' is not a key of 'sources'"),
    ("unknown check id", GOOD.replace("GPU-1020", "GPU-9999"), "line 15: requirements[0].check: unknown check id 'GPU-9999'"),
    ("bad severity", GOOD.replace("severity: blocker", "severity: fatal"), "line 16: requirements[0].severity: must be one of blocker, risk, advice"),
    ("threshold on a check without one", GOOD.replace("GPU-1020", "GPU-1060"), "line 17: requirements[0].threshold: this check takes no threshold"),
    ("missing threshold", GOOD.replace("    threshold: 12\n", ""), "line 15: requirements[0].threshold: missing: check GPU-1020 needs a number threshold"),
    ("bad date", GOOD.replace("checked: 2026-11-29", "checked: last week"), "line 10: sources.doc.checked: must be a date YYYY-MM-DD"),
    ("source without url", GOOD.replace("    url: https://github.com/example/docs/blob/0123abc/requirements.md\n", ""), "sources.doc: missing required key 'url'"),
    ("missing title", GOOD.replace("title: My policy\n", ""), "policy: missing required key 'title'"),
    ("wrong format", GOOD.replace("format: 1", "format: 2"), "line 1: format: must be 1, not 2"),
    ("empty file", "", "empty policy file"),
    ("not a mapping", "- just\n- a list\n", "line 1: policy: must be a mapping, not list"),
    ("duplicate key", GOOD.replace("kind: platform", "kind: platform\nkind: hygiene"), "line 6: duplicate key 'kind'"),
    ("duplicate check", GOOD + "  - {check: GPU-1020, severity: risk, threshold: 8, source: doc}\n", "line 19: requirements[1].check: GPU-1020 listed twice"),
    ("empty requirements", GOOD.split("requirements:")[0] + "requirements: []\n", "requirements: must be a non-empty list"),
    ("level outside owner-risk", GOOD.replace("severity: blocker", "severity: blocker\n    level: high"), "line 17: requirements[0].level: only owner-risk policies give a level"),
    ("owner-risk item with a severity", OWNER_RISK.replace("level: high", "level: high\n    severity: blocker"), "line 17: requirements[0].severity: an owner-risk item has a level"),
    ("owner-risk item without a level", OWNER_RISK.replace("    level: high\n", ""), "requirements[0]: missing required key 'level'"),
    ("owner-risk bad level", OWNER_RISK.replace("level: high", "level: severe"), "line 16: requirements[0].level: must be one of low, medium, high, not 'severe'"),
]


@pytest.mark.parametrize(("case", "text", "error"), BAD_POLICIES, ids=[c[0] for c in BAD_POLICIES])
def test_malformed_policy_is_rejected_with_line_field_and_reason(case: str, text: str, error: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "mine.yaml")
    assert str(caught.value).startswith("mine.yaml: ")
    assert error in str(caught.value)
    if case == "bad YAML":
        assert "expected ',' or ']'" in str(caught.value)


def test_good_policy_parses() -> None:
    policy = parse_policy(GOOD, "mine.yaml")
    assert policy.requirements[0].threshold == 12
    assert policy.requirements[0].source.checked == "2026-11-29"


def test_cli_rejects_a_malformed_policy_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("threshold: 12", "threshold: twelve"))
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--policy", str(bad))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"hostcheck: error: {bad}: line 17: requirements[0].threshold: must be a number" in proc.stderr


def test_cli_runs_a_user_policy_file(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(GOOD)  # needs 12 GiB VRAM: the 4090 has 24
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--policy", str(mine), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["policies"][0]["verdict"] == "feasible"


def test_owner_risk_set_is_a_policy_file_with_levels_and_sources() -> None:
    from hostcheck.policy import load_owner_risk

    policy = load_owner_risk()
    assert policy.kind == "owner-risk"
    levels = {r.check: r.level for r in policy.requirements}
    assert levels["OWN-1010"] == levels["ISO-1010"] == levels["DOC-1070"] == "high"
    assert all(r.source.url.startswith("https://") for r in policy.requirements)
    mine = parse_policy(OWNER_RISK, "mine.yaml")
    assert (mine.requirements[0].level, mine.requirements[0].severity) == ("high", "risk")


def test_owner_risk_cannot_be_requested_as_a_platform_policy() -> None:
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--policy", "owner-risk")
    assert proc.returncode == 2
    assert "is judged in every report" in proc.stderr


def test_explain_shows_owner_risk_level_and_new_checks_with_sources() -> None:
    own = run_cli("explain", "OWN-1010").stdout
    assert "- owner-risk: high risk" in own
    gen = " ".join(run_cli("explain", "GPU-1120").stdout.split())  # lines wrap at the terminal's width
    assert "ionet" in gen and "['nvidia ampere+', 'apple m1', 'apple m2', 'apple m3']" in gen
    assert "<https://web.archive.org/web/20261129000000/https://docs.io.net/docs/device-onboarding>" in gen
    kvm = run_cli("explain", "SYS-1140").stdout
    assert "tensordock" in kvm and "install.sh" in kvm


def test_unknown_policy_name_is_a_usage_error() -> None:
    proc = run_cli("audit", "--offline", "--policy", "vastai")
    assert proc.returncode == 2
    assert "no policy named 'vastai'" in proc.stderr


BAD_SNAPSHOTS = [
    ("not JSON", "{facts", "line 1 column 2: invalid JSON: Expecting property name enclosed in double quotes"),
    ("a list", "[]", "a facts snapshot is a JSON object, not list"),
    ("no meta", '{"gpu": {}}', "missing 'meta' object (is this a hostcheck facts file?)"),
    ("future format", '{"meta": {"facts_format": 9}}', "meta.facts_format is 9: written by a newer hostcheck (this one reads formats 1 to 3); upgrade hostcheck"),
    ("section not an object", '{"meta": {"facts_format": 1}, "gpu": 5}', "section 'gpu' must be an object, not int"),
]


@pytest.mark.parametrize(("case", "text", "error"), BAD_SNAPSHOTS, ids=[c[0] for c in BAD_SNAPSHOTS])
def test_malformed_snapshot_is_rejected(tmp_path: Path, case: str, text: str, error: str) -> None:
    path = tmp_path / "facts.json"
    path.write_text(text)
    with pytest.raises(FactsError) as caught:
        load_snapshot(path)
    assert str(caught.value) == f"{path}: {error}"
    proc = run_cli("audit", "--facts", str(path))
    assert proc.returncode == 2
    assert f"hostcheck: error: {path}: {error}" in proc.stderr


def test_missing_snapshot_file_is_exit_2(tmp_path: Path) -> None:
    proc = run_cli("audit", "--facts", str(tmp_path / "nope.json"))
    assert proc.returncode == 2
    assert "cannot read: No such file or directory" in proc.stderr


def test_snapshot_with_sections_missing_is_judged_unknown_not_pass(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text('{"meta": {"facts_format": 1}}')
    proc = run_cli("audit", "--facts", str(path), "--policy", "dedicated-host", "--format", "json")
    report = json.loads(proc.stdout)
    statuses = {f["status"] for f in report["policies"][0]["findings"]}
    assert statuses <= {"unknown", "pass"} and "unknown" in statuses
    passed = [f["id"] for f in report["policies"][0]["findings"] if f["status"] == "pass"]
    # Only checks that pass on the *absence* of a component may pass on empty facts: none here.
    assert passed == []
    assert report["policies"][0]["verdict"] == "undetermined"
    assert proc.returncode == 3


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_policy_parser_never_crashes_on_arbitrary_text(text: str) -> None:
    try:
        parse_policy(text, "fuzz.yaml")
    except PolicyError as exc:
        assert str(exc).startswith("fuzz.yaml: ")


# ============================================================ hostile files
# Each case: a clear message, exit 2, no hang, nothing overwritten.

ALIAS_BOMB = GOOD.replace("requirements:\n", """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
requirements:
""").replace("check: GPU-1020", "check: PLAT-1010").replace("threshold: 12", "threshold: *f")


def test_yaml_alias_bomb_is_refused_before_it_expands() -> None:
    # 9^6 = 531441 strings if expanded (the 647-byte variant took 1.4 GB).
    assert len(ALIAS_BOMB) < 1024
    with pytest.raises(PolicyError, match=r"mine.yaml: line \d+: more than 16 YAML aliases"):
        parse_policy(ALIAS_BOMB, "mine.yaml")


def test_a_few_yaml_aliases_still_work() -> None:
    text = GOOD.replace("requirements:\n", "x: &n 12\nrequirements:\n").replace("threshold: 12", "threshold: *n")
    with pytest.raises(PolicyError, match="x: unknown key"):  # the alias itself is fine
        parse_policy(text, "mine.yaml")


def test_deeply_nested_yaml_is_refused() -> None:
    # 200 levels: past hostcheck's limit, under libyaml's own (1000)
    with pytest.raises(PolicyError, match="line 19: nested deeper than 64 levels"):
        parse_policy(GOOD + "note: " + "[" * 200 + "]" * 200 + "\n", "mine.yaml")
    # 5000 on one line: libyaml, where PyYAML has it, scans the brackets ahead and refuses first
    with pytest.raises(PolicyError, match="line 19.*(nested deeper than 64 levels|exceeded maximum nesting depth)"):
        parse_policy(GOOD + "note: " + "[" * 5000 + "]" * 5000 + "\n", "mine.yaml")


HOSTILE_SNAPSHOTS = [
    ("non-UTF-8", b'\xff\xfe{"meta": {}}', "not UTF-8 text (byte 0)"),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000, "invalid JSON: nested deeper than 64 levels"),
    ("deep but under the parser's limit", b'{"meta": {"facts_format": 1}, "gpu": ' + b'{"a":' * 200 + b"1" + b"}" * 201,
     "invalid JSON: nested deeper than 64 levels"),
    ("huge integer", b'{"meta": {"facts_format": 1}, "gpu": {"n": ' + b"9" * 5000 + b"}}", "invalid JSON: an integer is out of range"),
    ("big integer", b'{"meta": {"facts_format": 1}, "gpu": {"n": ' + b"9" * 40 + b"}}", "invalid JSON: an integer is out of range"),
    ("NaN", b'{"meta": {"facts_format": 1}, "gpu": {"n": NaN}}', "invalid JSON: NaN is not a JSON number"),
    ("Infinity", b'{"meta": {"facts_format": 1}, "gpu": {"n": -Infinity}}', "invalid JSON: -Infinity is not a JSON number"),
    ("overflowing float", b'{"meta": {"facts_format": 1}, "gpu": {"n": 1e999}}', "invalid JSON: a number is out of range (infinite)"),
]


@pytest.mark.parametrize(("case", "data", "error"), HOSTILE_SNAPSHOTS, ids=[c[0] for c in HOSTILE_SNAPSHOTS])
def test_hostile_snapshot_is_rejected(tmp_path: Path, case: str, data: bytes, error: str) -> None:
    path = tmp_path / "facts.json"
    path.write_bytes(data)
    with pytest.raises(FactsError) as caught:
        load_snapshot(path)
    assert str(caught.value) == f"{path}: {error}"


def _special_files(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(17 << 20)  # sparse: costs no disk
    return {"FIFO": fifo, "/dev/zero": Path("/dev/zero"), "directory": tmp_path, "oversized": big}


def test_special_and_oversized_files_are_refused_quickly(tmp_path: Path) -> None:
    """A FIFO would hang a plain read and /dev/zero eat memory: each is refused within seconds,
    with exit 2 and no traceback."""
    for name, path in _special_files(tmp_path).items():
        for args in (["audit", "--facts", str(path)],
                     ["audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--policy", str(path)],
                     ["fleet", str(path)]):
            started = time.monotonic()
            proc = hostcheck(*args, timeout=60)
            assert time.monotonic() - started < 30, (name, args)
            if args[0] == "fleet" and name == "directory":
                continue  # a directory is what fleet reads: it holds only the FIFO and the big file
            assert proc.returncode == 2, (name, args, proc.stderr)
            assert "Traceback" not in proc.stderr
            expected = "too large" if name == "oversized" else "not a regular file"
            assert expected in proc.stderr, (name, args, proc.stderr)


def test_safeio_refuses_before_reading() -> None:
    with pytest.raises(FileInputError, match="not a regular file"):
        safeio.read_bytes(Path("/dev/zero"))
    with pytest.raises(FileInputError, match="too large"):
        safeio.read_bytes(SNAPSHOTS / "dedicated-4090.json", limit=100)


def test_json_out_is_strict() -> None:
    text = safeio.dumps({"a": float("nan"), "b": [float("inf")], "c": 1.5})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in output")) == {"a": None, "b": [None], "c": 1.5}


def test_report_of_facts_with_nan_is_valid_json() -> None:
    """A collector can measure NaN (an NVML sensor gone wrong); the JSON report stays valid."""
    from hostcheck.facts import from_jsonable
    from hostcheck.policy import load_shipped
    from hostcheck.render import render
    from hostcheck.report import build_report

    facts = from_jsonable(json.loads((SNAPSHOTS / "dedicated-4090.json").read_text()))
    facts["gpu"]["devices"][0]["power_draw_w"] = float("nan")
    facts["gpu"]["devices"][0]["vram_total_mib"] = float("inf")
    text = render(build_report(facts, [load_shipped("vast")]), "json")
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in output"))


# ============================================================ --output

# Every kind of target (devices, FIFOs, sockets, symlinks): tests/unit/test_output_targets.py


def test_redacted_output_is_shareable_and_unwritable_output_still_prints(tmp_path: Path) -> None:
    out = tmp_path / "redacted.json"
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "-f", "json", "--redact", "-o", str(out))
    assert proc.returncode in (0, 3, 4), proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~_umask()
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "-f", "json", "-o", str(tmp_path / "no" / "dir.json"))
    assert proc.returncode == 2 and json.loads(proc.stdout)["report_version"] == 1
    assert "printed to stdout instead" in proc.stderr


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ============================================================ options

BAD_OPTIONS = [
    ["--timeout", "nan"], ["--timeout", "inf"], ["--timeout", "-1"], ["--timeout", "0"], ["--timeout", "1e9"],
    ["--probe-port", "70000"], ["--probe-port", "0"], ["--probe-port", "-5"],
    ["--probe", "ftp://example.org", "--token", "x" * 16], ["--probe", "http://[::1", "--token", "x" * 16],
    ["--probe", "http://host:99999/", "--token", "x" * 16], ["--stun-server", "host:0"],
    ["--public-range", "300.1.0.0/16"],
]


@pytest.mark.parametrize("args", BAD_OPTIONS, ids=[" ".join(a)[:40] for a in BAD_OPTIONS])
def test_out_of_range_options_exit_2(args: list[str]) -> None:
    from typer.testing import CliRunner

    from hostcheck.cli import app

    for command in ("audit", "facts", "offer"):
        result = CliRunner().invoke(app, [command, "--offline", *args])
        assert result.exit_code == 2, (command, args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


def test_every_collecting_command_takes_the_one_set_of_live_options(tmp_path: Path) -> None:
    """audit, facts and offer take the same live-collection options, declared once: an http://
    probe is refused by each unless --insecure-http, before anything is collected or sent."""
    from hostcheck.cli import load_command

    def options(name: str) -> set[str]:
        return {opt for param in load_command(name).params for opt in param.opts}

    live = {"--offline", "--timeout", "--stun-server", "--probe", "--token-file", "--probe-fingerprint", "--token",
            "--probe-port", "--public-range", "--insecure-http"}
    for name in ("audit", "facts", "offer"):
        assert live <= options(name), (name, live - options(name))
    token = tmp_path / "token"
    token.write_text("x" * 32)
    token.chmod(0o600)
    for name in ("audit", "facts", "offer"):
        # Loopback only, should the refusal ever go: the probe and the STUN server are port 9 here.
        proc = run_cli(name, "--probe", "http://127.0.0.1:9/", "--token-file", str(token),
                       "--stun-server", "127.0.0.1:9", "--timeout", "2", *(["--no-disk-bw"] if name == "offer" else []))
        assert proc.returncode == 2 and "--insecure-http" in proc.stderr and proc.stdout == "", (name, proc.stderr)


# ============================================================ fleet

def test_fleet_shows_every_good_host_and_one_row_per_bad_report(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "-f", "json", "-o", str(good))
    assert proc.returncode in (0, 3, 4)
    report = json.loads(good.read_text())
    bad = {
        "truncated": good.read_text()[:300],
        "wrong-types": json.dumps({**report, "policies": [{"id": 5}]}),
        "findings-not-list": json.dumps({**report, "policies": [{**report["policies"][0], "findings": "x"}]}),
        "tool-not-object": json.dumps({**report, "tool": "x", "report_version": 7}),
        "nan": good.read_text().replace('"score": ', '"score": NaN, "x": ', 1),
        "array": "[]",
    }
    for name, text in bad.items():
        (tmp_path / f"{name}.json").write_text(text)
    os.mkfifo(tmp_path / "fifo.json")
    proc = run_cli("fleet", str(tmp_path), "-f", "json")
    assert proc.returncode == 2
    assert "7 report(s) could not be used" in proc.stderr and "Traceback" not in proc.stderr
    rows = {row["host"]: row for row in json.loads(proc.stdout)["hosts"]}
    assert rows["good"]["reachable"] is True and rows["good"]["policies"]
    for name in [*bad, "fifo"]:
        assert rows[name]["report_error"] is True and rows[name]["reason"].startswith(str(tmp_path / name)), rows[name]
    table = run_cli("fleet", str(tmp_path)).stdout
    assert table.count("BAD REPORT") == 7
    (good_line,) = [line for line in table.splitlines() if line.startswith("good ")]
    assert good_line.split()[1] == rows["good"]["owner_risk"]


# ============================================================ control characters

ESCAPES = "\x1b]0;owned\x07\x1b[2J\r\u202e"


def _hostile_facts(tmp_path: Path) -> Path:
    facts = json.loads((SNAPSHOTS / "dedicated-4090.json").read_text())
    facts["meta"]["hostname"] = f"box{ESCAPES}"
    facts["gpu"]["devices"][0]["name"] = f"RTX{ESCAPES}"
    facts["ssh"]["settings"] = {"$unknown": f"reason{ESCAPES}"}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    return path


def test_control_characters_never_reach_the_terminal(tmp_path: Path) -> None:
    facts = _hostile_facts(tmp_path)
    fleet_dir = tmp_path / "fleet"
    fleet_dir.mkdir()
    outputs = []
    for fmt in ("table", "markdown", "json"):
        proc = run_cli("audit", "--facts", str(facts), "-f", fmt, "-v")
        assert proc.returncode in (0, 3, 4), proc.stderr
        outputs.append(proc.stdout)
    report = json.loads(outputs[-1])
    assert report["host"]["hostname"] == f"box{ESCAPES}"  # JSON keeps the value, escaped by json itself
    (fleet_dir / f"host{ESCAPES[:5]}.json").write_text(outputs[-1])
    (fleet_dir / "bad\x1b[2J.json").write_text("{")
    for fmt in ("table", "markdown"):
        outputs.append(run_cli("fleet", str(fleet_dir), "-f", fmt).stdout)
    for out in outputs:
        assert not any(c in out for c in "\x1b\x07\r\u202e"), out[:500]
    # Markdown escapes the escape's backslash too: it renders as RTX\x1b.
    assert "box\\x1b]0;owned\\x07" in outputs[0] and "RTX\\\\x1b" in outputs[1]


def test_drift_text_escapes_control_characters() -> None:
    from hostcheck.fleet.reports import Change, HostDrift
    from hostcheck.render.fleet import drift_text

    text = drift_text([HostDrift(host="a\x1bb", changes=[Change(kind="x", detail="d\x1b[2J")])])
    assert "\x1b" not in text and "a\\x1bb" in text
