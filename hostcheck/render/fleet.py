"""Fleet table and drift, as terminal text or Markdown (JSON is the rows themselves)."""

from __future__ import annotations

from hostcheck.fleet.reports import Bandwidth, FleetRow, HostDrift
from hostcheck.models import Verdict
from hostcheck.render.escape import escape_tree
from hostcheck.render.markdown_escape import markdown_tree
from hostcheck.render.terminal import terminal_width, wrap

SHORT: dict[Verdict, str] = {Verdict.FEASIBLE: "ok", Verdict.FEASIBLE_WITH_RISKS: "risks", Verdict.NOT_FEASIBLE: "NO", Verdict.UNDETERMINED: "??"}


def _cells(row: FleetRow, policy_ids: list[str]) -> list[str]:
    if not row.reachable:
        return [row.host, "BAD REPORT" if row.report_error else "UNREACHABLE", "", "", "", "", row.reason or ""] + [""] * len(policy_ids)
    cells = [
        row.host,
        row.gpu or "none",
        "" if row.vram_gib is None else f"{row.vram_gib:g}",
        row.power or "",
        row.owner_risk or "",
        _bandwidth_cell(row.bandwidth),
        "",
    ]
    for pid in policy_ids:
        result = row.policies.get(pid)
        if result is None:
            cells.append("-")
            continue
        blockers = f" [{', '.join(result.blockers)}]" if result.blockers else ""
        cells.append(f"{SHORT[result.verdict]} {result.score}{blockers}")
    return cells


HEADERS = ["host", "GPU", "VRAM GiB", "power cap/default", "owner risk", "down/up Mbps", "note"]


def _bandwidth_cell(bw: Bandwidth | None) -> str:
    down, up = (None, None) if bw is None else (bw.download_mbps, bw.upload_mbps)
    if down is None and up is None:
        return ""  # no speed test was run (it is opt-in)
    return "/".join("?" if v is None else f"{v:.0f}" for v in (down, up))


def fleet_table(rows: list[FleetRow], policy_ids: list[str], markdown: bool = False) -> str:
    escape = markdown_tree if markdown else escape_tree
    rows, policy_ids = escape(rows), escape(policy_ids)
    headers = HEADERS + policy_ids
    body = [[str(c) for c in _cells(row, policy_ids)] for row in rows]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in body]
        legend = "\nVerdicts: ok = feasible, risks = feasible with risks, NO = not feasible (blockers in brackets), ?? = undetermined.\n"
        return "\n".join(lines) + "\n" + legend
    width = terminal_width()
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip() for cells in body]
    if max(map(len, lines)) > width:  # too wide for this terminal: one line per host, the answer only
        return "\n".join(_narrow(rows, policy_ids, width)) + "\n"
    legend = "ok = feasible, risks = feasible with risks, NO = not feasible [blockers], ?? = undetermined"
    return "\n".join([*lines, "", *wrap(legend, width)]) + "\n"


def _narrow(rows: list[FleetRow], policy_ids: list[str], width: int) -> list[str]:
    """One line per host, so a fleet of 20 fits a screen: its owner risk and the policies that
    would take it (as many names as the line holds, then how many more); every column, every
    blocker: a wider terminal, --format markdown or json."""
    host_w = max(len("host"), *(len(r.host) for r in rows)) if rows else 4
    lines = [f"{'host'.ljust(host_w)}  {'owner risk':10}  feasible (with risks) on"]
    for row in rows:
        head = f"{row.host.ljust(host_w)}  "
        if not row.reachable:
            lines += wrap(("BAD REPORT" if row.report_error else "UNREACHABLE") + f": {row.reason or ''}",
                          width, first=head, indent=" " * len(head))[:1]
            continue
        ok = [pid for pid in policy_ids if (r := row.policies.get(pid)) is not None and r.verdict in SHORT
              and SHORT[r.verdict] in ("ok", "risks")]
        head += f"{(row.owner_risk or '?'):10}  "
        shown = list(ok)
        while shown and len(head + ", ".join(shown) + f" +{len(ok) - len(shown)}") > width:
            shown.pop()
        more = f" +{len(ok) - len(shown)}" if len(shown) < len(ok) else ""
        lines.append((head + (", ".join(shown) + more if ok else "none")).rstrip())
    return [*lines, "", *wrap("Every column and each policy's blockers: a wider terminal (COLUMNS=200), "
                               "--format markdown or --format json.", width)]


def _host_text(headers: list[str], cells: list[str]) -> str:
    """'gpu-box-01: GPU RTX 4090; VRAM GiB 24; ...; vast ok 94' (empty cells left out)."""
    named = [f"{header} {cell}" for header, cell in zip(headers[1:], cells[1:], strict=False) if cell]
    return f"{cells[0]}: {'; '.join(named)}"


def drift_text(changes: list[HostDrift], markdown: bool = False) -> str:
    changes = markdown_tree(changes) if markdown else escape_tree(changes)
    if not changes:
        return "No drift: every host's verdicts, findings and listening sockets are unchanged.\n"
    lines = []
    for item in changes:
        lines.append(f"## {item.host}" if markdown else f"{item.host}:")
        for change in item.changes:
            where = f"[{change.policy}] " if change.policy else ""
            lines.append(f"- {change.kind}: {where}{change.detail}" if markdown else f"  {change.kind:18} {where}{change.detail}")
        if markdown:
            lines.append("")
    return "\n".join(lines) + "\n"
