"""A facts snapshot written to attack whoever opens its report: every string of a real
snapshot replaced by a payload (script tags, ``javascript:`` addresses, attribute breakers, SVG
and style payloads, Markdown markup), each wrapped in right-to-left override and mark
characters. The facts' format and the version that wrote them stay, so the snapshot loads;
the times ``offer`` and ``earnings`` parse keep the snapshot's values."""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from itertools import cycle
from typing import Any

from tests.helpers import SNAPSHOTS

PAYLOADS = [
    '<script>document.documentElement.dataset.pwned="PLANT1"</script>',
    "<img src=x onerror=\"document.documentElement.dataset.pwned='PLANT2'\">",
    '<iframe src="https://evil.example/PLANT3"></iframe>',
    "javascript:document.documentElement.dataset.pwned='PLANT4'",
    '" onmouseover="PLANT5" x="',
    "' autofocus onfocus='PLANT6' '",
    "<svg/onload=PLANT7><use href=\"https://evil.example/PLANT8.svg#x\"/></svg>",
    "<svg><script>PLANT9</script><foreignObject><a href=\"javascript:PLANT10\">x</a></foreignObject></svg>",
    "</style><style>body{background:url(https://evil.example/PLANT11)}</style>",
    "</title></textarea><base href=\"https://evil.example/PLANT12/\">",
    "<a href=\"javascript:alert('PLANT13')\">click</a> <!-- PLANT14 -->",
    "<meta http-equiv=refresh content=\"0;url=https://evil.example/PLANT15\">",
    "[PLANT16](javascript:alert(1)) ![PLANT17](https://evil.example/i.png) <https://evil.example/PLANT18>",
    "*PLANT19* `PLANT20` | PLANT21 | # PLANT22",
    "&lt;b&gt;PLANT23&#x3c;/b&gt; ]]> <![CDATA[PLANT24]]>",
    "data:text/html;base64,PHNjcmlwdD5QTEFOVDI1PC9zY3JpcHQ+",
]
RTL = ("\u202e", "\u200f")  # right-to-left override before, right-to-left mark after
KEPT = ("facts_format", "hostcheck_version")


def _planted(facts: Any, payloads: Iterator[str]) -> Any:
    if isinstance(facts, dict):
        return {k: v if k in KEPT else _planted(v, payloads) for k, v in facts.items()}
    if isinstance(facts, list):
        return [_planted(v, payloads) for v in facts]
    if isinstance(facts, str):
        return RTL[0] + next(payloads) + RTL[1]
    return facts


def hostile_facts(snapshot: str = "reference-laptop") -> dict[str, Any]:
    original = json.loads((SNAPSHOTS / f"{snapshot}.json").read_text())
    facts: dict[str, Any] = _planted(original, cycle(PAYLOADS))
    # Times that the commands parse (ISO 8601 with a zone) keep their values; the rest of meta
    # (the host name above all: the page's title and heading) is planted too.
    facts["meta"] = {**facts["meta"], "collected_at": original["meta"]["collected_at"]}
    facts["gpu"]["devices"][0]["thermal_slowdown"] = original["gpu"]["devices"][0]["thermal_slowdown"]
    facts["agents"]["sudo_activity"]["since"] = original["agents"]["sudo_activity"]["since"]
    return facts


class Shape(HTMLParser):
    """What a page is made of: its (element, attribute) pairs, attribute values, comments."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pairs: set[tuple[str, str]] = set()
        self.values: list[tuple[str, str, str]] = []
        self.comments: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.pairs.add((tag, ""))
        for name, value in attrs:
            self.pairs.add((tag, name))
            self.values.append((tag, name, value or ""))

    handle_startendtag = handle_starttag

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def shape(html: str) -> Shape:
    parsed = Shape()
    parsed.feed(html)
    parsed.close()
    return parsed
