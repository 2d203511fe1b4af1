"""--format html and `hostcheck report`: safe with hostile facts, the same data as the other formats.

A hostile facts corpus (tests/hostile_corpus.py: every string of a real snapshot replaced by a
script, an attribute breaker, an SVG or style payload, a ``javascript:`` address, each wrapped
in right-to-left marks) is rendered, the page is parsed with the standard library's HTML parser,
and its (element, attribute) pairs must all be pairs the layout makes for the clean snapshot:
a value can add no element and no attribute. The Markdown report is held to the same rule
after a real CommonMark renderer (markdown-it-py) turns it into HTML. The browser's view of
the same pages is in test_html_browser.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from hostcheck.facts import from_jsonable, load_snapshot
from hostcheck.policy import load_shipped, resolve_policies, shipped_policy_names
from hostcheck.render import render
from hostcheck.render.html import render_audit
from hostcheck.render.html.markup import el, link
from hostcheck.render.html.page import CSP, CSS
from hostcheck.render.markdown_escape import html_text, https_url
from hostcheck.report import build_report
from tests.helpers import SNAPSHOTS, run_cli
from tests.hostile_corpus import PAYLOADS, RTL, hostile_facts, shape

EARNINGS = ["--electricity", "07-23=0.32,23-07=0.18", "--price", "0.10", "--occupancy", "30", "--no-config"]


def _report(facts: dict[str, Any]) -> Any:
    return build_report(from_jsonable(facts), resolve_policies([]))


def _clean(name: str = "reference-laptop") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SNAPSHOTS / f"{name}.json").read_text())
    return data


def _policy_urls() -> set[str]:
    policies = [load_shipped(name) for name in shipped_policy_names()]  # owner-risk.yaml too
    return {req.source.url for policy in policies for req in policy.requirements}


def assert_nothing_planted(hostile: str, clean: str, reached: int = 10) -> None:
    """The hostile page is made of the clean page's (element, attribute) pairs only; no attribute
    value, comment or link comes from a value; every planted value shows as text."""
    got, template = shape(hostile), shape(clean)
    assert got.pairs <= template.pairs, sorted(got.pairs - template.pairs)
    from_values = [v for v in got.values if any(w in v[2] for w in ("PLANT", "evil.example", "javascript", "pwned"))]
    assert from_values == [], from_values[:5]
    assert got.comments == template.comments == []
    hrefs = {value for tag, name, value in got.values if name == "href"}
    assert all(h.startswith("https://") for h in hrefs), hrefs
    assert hrefs <= {value for tag, name, value in template.values if name == "href"}
    text = "".join(got.text)
    planted = sum(f"PLANT{n}" in text for n in range(1, len(PAYLOADS) + 10))
    assert planted >= reached, f"only {planted} planted values reached the page: the test would prove little"
    assert RTL[0] not in text and "\\u202e" in text  # the override shows as what it is, reorders nothing


def test_escaping_is_one_layer_for_html_and_markdown() -> None:
    assert html_text('<a href="x">\u202e\x1b') == "&lt;a href=&quot;x&quot;&gt;\\u202e\\x1b"
    for url in ("javascript:alert(1)", "JAVASCRIPT:x", "data:text/html,x", "//evil.example/x", "http://example.com",
                "https:/no-host", "https://user:pw@example.com/", "https://example.com/\"onclick=x",
                "https://example.com/<x>", "https://exa mple.com", " https://example.com"):
        assert https_url(url) is None, url
        assert "<a" not in link(url)
    assert https_url("https://github.com/vast-ai/docs/blob/f16f886/host/a.mdx#L3") is not None
    assert link("https://example.com/a?b=1&c=2", "t") == (
        '<a href="https://example.com/a?b=1&amp;c=2" rel="noreferrer noopener">t</a>')
    with pytest.raises(ValueError):
        el("a", href="https://example.com")  # links only through link()
    with pytest.raises(ValueError):
        el("div", onclick="x")


def test_the_page_allows_no_script_and_no_load() -> None:
    page = render_audit(_report(_clean()))
    head = page[: page.index("</head>")]
    assert f'content="{html_text(CSP)}"' in head and head.index("Content-Security-Policy") < head.index("<style>")
    for directive in ("default-src 'none'", "script-src 'none'", "img-src 'none'", "base-uri 'none'", "form-action 'none'"):
        assert directive in CSP
    assert "unsafe-inline" not in CSP and f"<style>{CSS}</style>" in page  # the one stylesheet, allowed by its hash
    parsed = shape(page)
    assert not {tag for tag, _ in parsed.pairs} & {"script", "img", "link", "iframe", "object", "embed", "base", "form"}
    assert ("details", "") in parsed.pairs and "@media print" in CSS


def test_a_hostile_audit_adds_no_element_or_attribute() -> None:
    assert_nothing_planted(render_audit(_report(hostile_facts())), render_audit(_report(_clean())))


def test_hostile_earnings_and_combined_report_add_no_element_or_attribute(tmp_path: Path) -> None:
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(hostile_facts()))
    config = tmp_path / "earnings.toml"
    config.write_text('electricity = "07-23=0.32,23-07=0.18"\nprice = 0.10\noccupancy = 30\n')
    pages = {}
    for name, facts in (("hostile", hostile), ("clean", SNAPSHOTS / "reference-laptop.json")):
        earnings = run_cli("earnings", "--facts", str(facts), *EARNINGS, "-f", "html")
        assert earnings.returncode in (0, 4), earnings.stderr  # 4: owner risk high, as on the terminal
        combined = tmp_path / f"{name}.html"
        proc = run_cli("report", "--facts", str(facts), "--earnings-config", str(config), "-o", str(combined))
        assert proc.returncode == 0, proc.stderr
        pages[name] = (earnings.stdout, combined.read_text())
    assert_nothing_planted(pages["hostile"][0], pages["clean"][0], reached=1)  # the GPU's name: the rest is data
    assert_nothing_planted(pages["hostile"][1], pages["clean"][1])


def test_a_hostile_fleet_adds_no_element_or_attribute(tmp_path: Path) -> None:
    pages = {}
    for name, facts in (("hostile", hostile_facts()), ("clean", _clean())):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "gpu-box.json").write_text(json.dumps(_report(facts).as_dict()))
        (folder / "dedicated.json").write_text(json.dumps(_report(_clean("dedicated-4090")).as_dict()))
        hosts = PAYLOADS[:4] if name == "hostile" else ["down-1", "down-2", "down-3", "down-4"]
        (folder / "index.json").write_text(json.dumps([{"host": h, "status": "unreachable", "message": h} for h in hosts]))
        proc = run_cli("fleet", str(folder), "-f", "html")
        assert proc.returncode in (0, 3, 4), proc.stderr
        pages[name] = proc.stdout
    assert_nothing_planted(pages["hostile"], pages["clean"], reached=5)  # host names, GPU, power; the rest is verdicts


def test_a_hostile_markdown_report_adds_no_element_or_attribute() -> None:
    def as_html(facts: dict[str, Any]) -> str:
        markdown = render(_report(facts), "markdown", verbose=True)
        return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)

    got, template = shape(as_html(hostile_facts())), shape(as_html(_clean()))
    assert got.pairs <= template.pairs, sorted(got.pairs - template.pairs)
    assert not [v for v in got.values if any(w in v[2] for w in ("PLANT", "evil.example", "javascript"))]
    assert sum("PLANT" in t for t in got.text) >= 10


def test_links_go_only_to_the_sources_the_policies_cite() -> None:
    parsed = shape(render_audit(_report(_clean("dedicated-4090"))))
    hrefs = {value for tag, name, value in parsed.values if name == "href"}
    assert hrefs and hrefs <= _policy_urls()


def test_the_html_report_holds_the_same_answer_as_the_terminal() -> None:
    report = _report(_clean())
    page = shape(render_audit(report))
    text = " ".join(page.text)
    assert " ".join(report.answer.headline) in text  # the answer first, as on the terminal
    assert text.index(report.answer.headline[0]) < text.index("Every finding, once")
    for policy in report.policies:
        for finding in policy.findings:
            assert finding.id in text
    assert report.tool.version in text and report.generated_at in text


def test_redact_applies_to_the_html_report(tmp_path: Path) -> None:
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    hostname = facts["meta"]["hostname"]
    out = tmp_path / "r.html"
    proc = run_cli("report", "--facts", str(SNAPSHOTS / "reference-laptop.json"), "--redact", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert hostname not in page and "redacted" in page
    assert "reference-laptop.json" not in page  # the command line in the header names no file either


def test_commands_without_an_html_layout_say_so() -> None:
    """The html format declines these kinds (hostcheck/render/formats/html.py): --format refuses
    it before any work, naming the formats that do render the command's report."""
    cases = {"offer": ["offer", "--facts", str(SNAPSHOTS / "reference-laptop.json")],
             "fleet drift": ["fleet", "diff", ".", "."], "fleet's rehearsals": ["fleet", "watch", "."]}
    for kind, args in cases.items():
        proc = run_cli(*args, "-f", "html")
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert f"the html format does not render the {kind}; use table or json or markdown" in proc.stderr


def test_the_uptime_strip_draws_the_terminal_timeline(tmp_path: Path) -> None:
    from hostcheck.recording.analysis import analyse
    from hostcheck.recording.store import read_recording
    from hostcheck.render.html import render_watch
    from hostcheck.render.watch import SYMBOLS, timeline
    from hostcheck.watch.rules import score_all
    from tests.watch_fixtures import write_week

    db = tmp_path / "week.db"
    injected = write_week(db)
    analysis = analyse(read_recording(db), now=injected[-1][1] + 3 * 86400)
    page = shape(render_watch(analysis, score_all(analysis), str(db)))
    # Each run of one state in a row of the terminal's timeline is one rectangle of that state.
    by_symbol = {symbol: state for state, symbol in SYMBOLS.items()}
    runs: dict[str, int] = {}
    for line in timeline(analysis)[1:]:
        cells = line.split("|")[1]
        for i, symbol in enumerate(cells):
            if symbol != " " and (i == 0 or cells[i - 1] != symbol):
                state = by_symbol[symbol]
                runs[state] = runs.get(state, 0) + 1
    drawn: dict[str, int] = {}
    for tag, name, value in page.values:
        if tag == "rect" and name == "class" and value.startswith("s-"):
            drawn[value] = drawn.get(value, 0) + 1
    legend = len(SYMBOLS)  # one swatch per state
    assert {k: v - 1 for k, v in drawn.items()} == {"s-" + s.replace(" ", "-"): n for s, n in runs.items()} | {
        "s-" + s.replace(" ", "-"): 0 for s in SYMBOLS if s not in runs}
    assert sum(drawn.values()) == sum(runs.values()) + legend
    text = " ".join(page.text)
    for cause, _, _ in injected:  # every outage written is in the table with its cause
        assert cause in runs and cause in text


def test_the_earnings_chart_draws_the_report_chart() -> None:
    from hostcheck.render.earnings.html import charted_platform, render_earnings_html

    proc = run_cli("earnings", "--facts", str(SNAPSHOTS / "reference-laptop.json"), *EARNINGS, "--heating",
                   "heat-pump", "--cooling-months", "6-8", "-f", "json")
    report = json.loads(proc.stdout)
    chart = charted_platform(report)["chart"]  # type: ignore[index]
    page = shape(render_earnings_html(report))
    lines = [value for tag, name, value in page.values if tag == "polyline" and name == "points"]
    # Winter and summer, as the terminal's chart draws them, one point per occupancy step: the
    # charted platform's first, then each other platform's in its folded section.
    charts = [p for p in report["platforms"] if p.get("chart")]
    assert len(lines) == 2 * len(charts) and all(len(points.split()) == len(chart["occupancy_pct"]) for points in lines)
    assert {value for tag, name, value in page.values if tag == "polyline" and name == "class"} == {
        "ln ln-winter", "ln ln-summer"}


def test_a_hostile_recording_adds_no_element_or_attribute(tmp_path: Path) -> None:
    from tests.watch_fixtures import write_week

    pages = {}
    hostile = tuple(RTL[0] + payload + RTL[1] for payload in PAYLOADS[:3])
    for name, said in (("clean", ("GPU is lost", "clean", "unclean")), ("hostile", hostile)):
        db = tmp_path / f"{name}.db"
        write_week(db, gpu_error=said[0], evidence=(said[1], said[2]))
        proc = run_cli("watch", "report", "--db", str(db), "-f", "html")
        assert proc.returncode == 0, proc.stderr
        pages[name] = proc.stdout.replace(str(db), "DB")
    assert_nothing_planted(pages["hostile"], pages["clean"], reached=3)


def test_the_audit_with_prices_has_the_terminals_earnings_lines() -> None:
    args = ["audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--price", "0.30", "--electricity", "0.25",
            "--occupancy", "50"]
    terminal = [line for line in run_cli(*args, env={"COLUMNS": "1000"}).stdout.splitlines() if line.startswith("Earnings on")]
    proc = run_cli(*args, "-f", "html")
    items = [text for text in shape(proc.stdout).text if text.startswith("Earnings on")]
    assert len(terminal) == 3 and items == terminal  # the feasible platforms, each said once
    assert proc.stdout.rstrip().endswith("</html>")
