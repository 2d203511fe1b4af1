"""--format markdown: no value from the facts becomes markup (hostcheck/render/markdown_escape.py).

The output is parsed by a real CommonMark renderer (markdown-it-py, with GFM tables and
strikethrough) and the HTML it makes is read back with the standard library's HTML parser:
every planted value must come out as text, exactly, and no element, attribute or comment of
the rendered page may come from it.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from itertools import cycle
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from hostcheck.facts import from_jsonable
from hostcheck.policy import resolve_policies
from hostcheck.render import render
from hostcheck.render.markdown_escape import markdown_text
from hostcheck.report import build_report
from tests.helpers import SNAPSHOTS, run_cli

HOSTILE = [
    '<script>alert("PLANT1")</script>',
    "<img src=x onerror=alert('PLANT2')>",
    '<iframe src="https://evil.example/PLANT3"></iframe>',
    "<!-- PLANT4 --> after a comment",
    "[PLANT5](https://evil.example/x) and ![PLANT6](https://evil.example/i.png)",
    "*PLANT7* and **PLANT8** and _PLANT9_ and __PLANT10__ and ~~PLANT11~~",
    "`PLANT12` and ``PLANT13``",
    "a | PLANT14 | b",
    "<https://evil.example/PLANT15> and https://evil.example/PLANT16 and www.evil.example/PLANT17",
    "# PLANT18",
    "- PLANT19",
    "1. PLANT20",
    "> PLANT21",
    "    PLANT22 indented",
    "&lt;b&gt;PLANT23&lt;/b&gt; &amp; &#60;i&#62;",
    "\\*PLANT24\\* \\",
    "<a href=\"javascript:alert('PLANT25')\">x</a>",
    "<div onmouseover=\"PLANT26\">x</div> <svg onload=PLANT27>",
    "=== PLANT28",
    "PLANT29 <style>body{display:none}</style>",
]


def markdown_to_html(text: str) -> str:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)


class Page(HTMLParser):
    """The elements, attribute values, comments and text of rendered HTML, and for each text
    the elements it sits in."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[str] = []
        self.comments: list[str] = []
        self.texts: list[tuple[str, tuple[str, ...]]] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [f"{name}={value}" for name, value in attrs]
        if tag not in ("br", "hr", "img"):
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            del self._open[len(self._open) - 1 - self._open[::-1].index(tag):]

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        self.texts.append((data, tuple(self._open)))


def page(html: str) -> Page:
    parsed = Page()
    parsed.feed(html)
    parsed.close()
    return parsed


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_renders_as_exactly_its_text(value: str) -> None:
    for where in ("{}", "a paragraph: {}", "| a | b |\n|---|---|\n| x | {} |"):
        rendered = page(markdown_to_html(where.format(markdown_text(value))))
        assert set(rendered.tags) <= {"p", "table", "thead", "tbody", "tr", "th", "td"}, (where, rendered.tags)
        assert rendered.attributes == [] and rendered.comments == []
        assert value in "".join(text for text, _ in rendered.texts), where
    # GFM renderers (GitHub, forums) link bare web addresses by themselves: none is left whole.
    assert "://" not in markdown_text("see https://evil.example") and "www." not in markdown_text("www.evil.example")


def _planted(facts: Any, payloads: Any) -> Any:
    """Every string value of ``facts`` replaced by the next hostile value (the facts' format and
    the version that wrote them stay, so the snapshot still loads)."""
    if isinstance(facts, dict):
        return {k: v if k in ("facts_format", "hostcheck_version") else _planted(v, payloads) for k, v in facts.items()}
    if isinstance(facts, list):
        return [_planted(v, payloads) for v in facts]
    if isinstance(facts, str):
        return next(payloads)
    return facts


def _hostile_facts() -> Any:
    return _planted(json.loads((SNAPSHOTS / "reference-laptop.json").read_text()), cycle(HOSTILE))


def _assert_no_planted_markup(markdown: str) -> Page:
    rendered = page(markdown_to_html(markdown))
    # Only the layout's own elements (the offer writes field names as code); no attribute and
    # no comment from a value.
    assert set(rendered.tags) <= {"h1", "h2", "p", "strong", "em", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th",
                                  "td", "a", "code"}, set(rendered.tags)
    assert not any("PLANT" in a or "evil.example" in a for a in rendered.attributes)
    assert rendered.comments == []
    # Planted text reaches the page as text, never as emphasis, code or a link.
    planted = [(text, inside) for text, inside in rendered.texts if "PLANT" in text]
    assert planted, "no planted value reached the report: the test would prove nothing"
    made = [(text, inside) for text, inside in planted if set(inside) & {"em", "code", "a", "s", "del"}]
    assert made == [], made[:5]
    return rendered


def test_no_planted_markup_survives_a_markdown_report() -> None:
    report = build_report(from_jsonable(_hostile_facts()), resolve_policies([]))
    rendered = _assert_no_planted_markup(render(report, "markdown", verbose=True))
    whole = "".join(text for text, _ in rendered.texts)
    reached = [value for value in HOSTILE if value in whole]
    assert len(reached) >= len(HOSTILE) // 2, reached  # most values appear whole, as they were written


def test_no_planted_markup_survives_the_markdown_offer(tmp_path: Path) -> None:
    facts = _hostile_facts()
    # `offer` checks the facts' times (ISO 8601, with a zone), so those keep the snapshot's values.
    original = json.loads((SNAPSHOTS / "reference-laptop.json").read_text())
    facts["meta"] = original["meta"]
    facts["gpu"]["devices"][0]["thermal_slowdown"] = original["gpu"]["devices"][0]["thermal_slowdown"]
    facts["agents"]["sudo_activity"]["since"] = original["agents"]["sudo_activity"]["since"]
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    proc = run_cli("offer", "--format", "markdown", "--facts", str(path))
    assert proc.returncode == 0, proc.stderr
    _assert_no_planted_markup(proc.stdout)


def test_no_planted_markup_survives_the_markdown_fleet_view(tmp_path: Path) -> None:
    report = build_report(from_jsonable(_hostile_facts()), resolve_policies([]))
    (tmp_path / "gpu-box.json").write_text(json.dumps(report.as_dict()))
    (tmp_path / "index.json").write_text(json.dumps(
        [{"host": value, "status": "unreachable", "message": value} for value in HOSTILE[:8]]))
    proc = run_cli("fleet", str(tmp_path), "-f", "markdown")
    assert proc.returncode in (0, 3, 4), proc.stderr
    _assert_no_planted_markup(proc.stdout)
