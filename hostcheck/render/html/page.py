"""The page every HTML report shares: a Content-Security-Policy that allows no script and no
load at all (its one stylesheet is allowed by its hash), the stylesheet (phone-width, print),
and the header card."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence

from hostcheck.render.html.markup import Child, Markup, el

CSS = """
:root{color-scheme:light;--ok:#1a7f37;--risk:#9a6700;--bad:#cf222e;--unk:#6e7781;--line:#d0d7de}
*{box-sizing:border-box}
body{margin:0;font:16px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;background:#fff}
main{max-width:60rem;margin:0 auto;padding:1rem}
h1{font-size:1.4rem;margin:.2rem 0 .6rem}h2{font-size:1.15rem;margin:1.4rem 0 .5rem}h3{font-size:1rem;margin:1rem 0 .4rem}
main,p,li,dd,dt,summary,figcaption{overflow-wrap:anywhere}td,th{overflow-wrap:break-word}
header.card{border:1px solid var(--line);border-radius:8px;padding:.8rem 1rem;background:#f6f8fa}
header.card dl{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .8rem;margin:.4rem 0 0;font-size:.9rem}
dt{font-weight:600}dd{margin:0}
.answer{font-size:1.08rem;font-weight:600;border-left:4px solid var(--bad);padding:.3rem .8rem;margin:1rem 0}
.answer.good{border-color:var(--ok)}
table{width:100%;border-collapse:collapse;table-layout:fixed;font-size:.92rem;margin:.4rem 0}
th,td{border-bottom:1px solid var(--line);padding:.3rem .4rem;text-align:left;vertical-align:top}th{font-size:.82rem}
details{border:1px solid var(--line);border-radius:6px;padding:.3rem .7rem;margin:.4rem 0}
summary{cursor:pointer;font-weight:600}
details dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem;font-size:.92rem}
@media (max-width:30rem){details dl,header.card dl{grid-template-columns:1fr}dd{margin-bottom:.3rem}}
.tag{display:inline-block;overflow-wrap:normal;font-size:.72rem;font-weight:700;padding:0 .35rem;border-radius:4px;color:#fff;background:var(--unk)}
.BLOCKER,.NO,.not-feasible,.HIGH{background:var(--bad)}.RISK,.MEDIUM,.feasible-with-risks{background:var(--risk)}
.ok,.LOW,.feasible,.meets{background:var(--ok)}.below{background:var(--bad)}
.last-wide th:last-child{width:50%}ul.verdicts{list-style:none;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:.2rem .6rem}
pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85rem;background:#f6f8fa;padding:.5rem;border-radius:6px}
figure{margin:.5rem 0}svg{width:100%;height:auto;display:block;margin:.3rem 0}
svg text{font:12px system-ui,sans-serif;fill:#1f2328}
.s-up{fill:#2da44e}.s-network{fill:#bf8700}.s-power{fill:#cf222e}.s-reboot{fill:#8250df}.s-driver{fill:#fb8500}
.s-suspend{fill:#0969da}.s-not-recorded{fill:#d0d7de}.axis{stroke:#57606a;stroke-width:1}
.grid{stroke:#d0d7de;stroke-width:.5}.ln{fill:none;stroke-width:2}.ln-winter{stroke:#0969da}
.ln-summer{stroke:#cf222e}.ln-year{stroke:#1a7f37}.ln-other{stroke:#8250df}
ul.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.2rem 1rem;font-size:.85rem}
ul.legend svg{display:inline-block;width:.8rem;height:.8rem;margin:0 .3rem 0 0;vertical-align:middle}
footer{margin-top:2rem;font-size:.85rem;color:#57606a}
@media print{body{font-size:11pt}main{max-width:none;padding:0}details{border:0;padding:0}
details::details-content{content-visibility:visible;display:block}a{color:inherit}
a[href]::after{content:" <" attr(href) ">";font-size:.8em;overflow-wrap:anywhere}
header.card{background:none}section,details,table,svg{break-inside:avoid-page}}
""".strip()

_HASH = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
CSP = (f"default-src 'none'; style-src 'sha256-{_HASH}'; img-src 'none'; font-src 'none'; "
       "script-src 'none'; base-uri 'none'; form-action 'none'")
"""No script, no load of any kind (images, fonts, frames, connections), no form; the one
stylesheet by its hash, so an injected style would not apply either."""


def header_card(title: str, rows: Iterable[tuple[str, Child]]) -> Markup:
    """The card the report opens with: its title, then what made it (version, command, dates)."""
    return el("header", el("h1", title), el("dl", [[el("dt", k), el("dd", v)] for k, v in rows]), class_="card")


def page(title: str, body: Iterable[Child]) -> str:
    """The whole document."""
    head = el("head", Markup('<meta charset="utf-8">'),
              el("meta", name="viewport", content="width=device-width, initial-scale=1"),
              el("meta", http_equiv="Content-Security-Policy", content=CSP),
              el("meta", name="referrer", content="no-referrer"),
              el("meta", name="generator", content="hostcheck"),
              el("title", title), Markup(f"<style>{CSS}</style>"))
    return "<!DOCTYPE html>\n" + el("html", head, el("body", el("main", list(body))), lang="en") + "\n"


def section(title: str, *children: Child, id_: str | None = None) -> Markup:
    return el("section", el("h2", title), list(children), id=id_)


def fold(summary: Child, *children: Child, open_: bool = False) -> Markup:
    """A section that folds: its summary line, the rest on demand."""
    return el("details", el("summary", summary), list(children), open=open_)


def tag(word: str, kind: str | None = None) -> Markup:
    """A coloured label (BLOCKER, RISK, feasible, ...); its class is one of the stylesheet's words."""
    return el("span", word, class_=f"tag {_class(kind or word)}")


def _class(word: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in word.replace(" ", "-"))[:40]


def table(head: list[str], rows: Iterable[Sequence[Child]], last_wide: bool = False) -> Markup:
    """A table whose columns share the width (the last one takes half of it with ``last_wide``):
    long words break inside their cell, so no table is wider than a phone."""
    return el("table", el("thead", el("tr", [el("th", h, scope="col") for h in head])),
              el("tbody", [el("tr", [el("td", c) for c in row]) for row in rows]), class_="last-wide" if last_wide else None)
