"""The fleet table as HTML: one row per host with its verdict per policy, then each host's
details; the cells are the terminal table's (:mod:`hostcheck.render.fleet`)."""

from __future__ import annotations

from hostcheck.fleet.reports import FleetRow
from hostcheck.render.fleet import HEADERS, SHORT, _cells
from hostcheck.render.html.markup import Markup, el
from hostcheck.render.html.page import fold, header_card, section, table, tag

LEGEND = "ok = feasible, risks = feasible with risks, NO = not feasible [blockers], ?? = undetermined"


def fleet_header(version: str, command: str, generated: str, hosts: int) -> Markup:
    return header_card("hostcheck fleet", [("hostcheck", version), ("command", command or "hostcheck fleet"),
                                           ("generated", generated), ("hosts", str(hosts))])


def fleet_body(rows: list[FleetRow], policy_ids: list[str]) -> list[Markup]:
    summary = []
    details = []
    for row in rows:
        cells = _cells(row, policy_ids)
        verdicts = []
        for pid in policy_ids:
            result = row.policies.get(pid) if row.reachable else None
            if result is not None:
                verdicts.append(el("li", f"{pid} ", tag(SHORT[result.verdict], result.verdict), f" {result.score}"))
        said = el("ul", verdicts, class_="verdicts") if row.reachable else cells[1] + (f": {row.reason}" if row.reason else "")
        summary.append([row.host, row.owner_risk or "", said])
        named = [(h, c) for h, c in zip([*HEADERS, *policy_ids][1:], cells[1:], strict=False) if c]
        details.append(fold(row.host, el("dl", [[el("dt", h), el("dd", c)] for h, c in named])))
    return [section("Hosts", table(["host", "owner risk", "verdict and score per policy"], summary, last_wide=True), el("p", el("small", LEGEND)), id_="fleet"),
            section("Each host", details)]
