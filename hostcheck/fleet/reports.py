"""Fleet: read many hosts' JSON reports, compare them side by side, and show drift.

Input is what `playbooks/audit.yml` fetches: one `<host>.json` report per host, and an
`index.json` listing every host of the inventory with its outcome, so that a host that could
not be audited (unreachable, audit failed) is reported, not dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from hostcheck import safeio
from hostcheck.checks import family_prefixes
from hostcheck.checks.base import listed_devices
from hostcheck.checks.readers import listening_sockets, measured_bandwidth
from hostcheck.errors import FileInputError, FleetError, Missing
from hostcheck.facts import Unknown, from_jsonable
from hostcheck.fleet.drift import fact_changes
from hostcheck.models import REPORT_VERSION, VERDICT_RANK, PolicyResult, Rating, Report, Status, Verdict

if TYPE_CHECKING:
    from hostcheck.redact import Redactor

INDEX_NAME = "index.json"
# How bad a change is: a rise in rank is a regression.
STATUS_RANK: dict[Status, int] = {Status.PASS: 0, Status.SKIPPED: 0, Status.WARN: 1, Status.UNKNOWN: 2, Status.ERROR: 2, Status.FAIL: 3}


@dataclass
class HostEntry:
    host: str
    report: Report | None = None
    unreachable: str | None = None  # reason, when the host could not be audited
    error: bool = False  # its report exists but cannot be used (unreachable says why)
    path: str = ""
    policies: dict[str, PolicyResult] = field(default_factory=dict)


class _Row(BaseModel):
    # Written out with exclude_unset: a row carries the fields its kind sets, in this order.
    model_config = ConfigDict(extra="forbid")

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


class PolicyCell(_Row):
    """One policy's outcome for one host, as the fleet table shows it."""

    verdict: Verdict
    score: int
    blockers: list[str]


class Bandwidth(_Row):
    download_mbps: float | None = None
    upload_mbps: float | None = None


class FleetRow(_Row):
    """One host of the fleet view: a reachable host's summary, or why it has none."""

    host: str
    reachable: bool
    reason: str | None = None
    hostcheck_version: str | None = None
    generated_at: str | None = None
    owner_risk: Rating | None = None
    gpu: str | None = None
    vram_gib: float | None = None
    power: str | None = None
    gpu_reason: str | None = None
    bandwidth: Bandwidth | None = None
    policies: dict[str, PolicyCell | None]
    report_error: bool | None = None


class Change(_Row):
    """One line of drift: what changed, for which policy or check, said in words."""

    kind: str
    policy: str | None = None
    check: str | None = None
    policies: list[str] | None = None
    detail: str


class HostDrift(_Row):
    host: str
    changes: list[Change]


def _read_text(path: Path) -> str:
    try:
        return safeio.read_text(path)
    except FileInputError as exc:
        raise FleetError(f"{path}: {exc}") from exc


def _parse_json(path: Path, text: str) -> Any:
    try:
        return safeio.loads(text)
    except FileInputError as exc:
        raise FleetError(f"{path}: {exc}") from exc


def _read_json(path: Path) -> Any:
    return _parse_json(path, _read_text(path))


def read_index(path: Path) -> list[HostEntry]:
    """Hosts the audit playbook could not get a report from, with its reason."""
    rows = _read_json(path)
    if not isinstance(rows, list):
        raise FleetError(f"{path}: the audit index is a JSON list of hosts")
    missing = []
    for row in rows:
        if isinstance(row, dict) and not row.get("report"):
            reason = f"{row.get('status', 'no report')}: {row.get('message') or 'no report'}"
            missing.append(HostEntry(host=str(row.get("host")), unreachable=reason.strip(), path=str(path)))
    return missing


def _where(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as the field path a reader finds in the file: policies[0].verdict."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "the report"


_JSON_TYPE = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
              float: "a number", type(None): "null"}


def _problem(exc: ValidationError) -> str:
    """The first thing wrong with a report, in JSON's words, and how many more there are."""
    errors = exc.errors()
    first = errors[0]
    kind, found = first["type"], _JSON_TYPE.get(type(first.get("input")), "something else")
    if kind == "missing":
        reason = "missing"
    elif kind in ("model_type", "dict_type"):
        reason = f"must be an object, not {found}"
    elif kind == "list_type":
        reason = f"must be a list, not {found}"
    else:
        reason = first["msg"][0].lower() + first["msg"][1:]
    message = f"{_where(tuple(first['loc']))}: {reason}"
    return message + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")


def read_entry(path: Path) -> HostEntry:
    text = _read_text(path)
    data = _parse_json(path, text)
    if not isinstance(data, dict):
        raise FleetError(f"{path}: not a hostcheck report (a JSON object is expected)")
    version = data.get("report_version")
    if version is None:
        raise FleetError(f"{path}: not a hostcheck report (no report_version)")
    if type(version) is not int:  # true == 1 and 1.0 == 1, yet neither is a format number
        raise FleetError(f"{path}: report_version must be an integer, not {type(version).__name__} {version!r}")
    if version != REPORT_VERSION:
        tool = data.get("tool")
        written_by = tool.get("version", "?") if isinstance(tool, dict) else "?"
        raise FleetError(
            f"{path}: report format {version} (written by hostcheck {written_by}); this hostcheck reads format "
            f"{REPORT_VERSION}: re-run the audit on that host with this version"
        )
    try:
        report = Report.from_json(text, family_prefixes())
    except ValidationError as exc:
        raise FleetError(f"{path}: not a usable hostcheck report: {_problem(exc)}") from None
    return HostEntry(host=path.stem, report=report, path=str(path), policies={p.id: p for p in report.policies})


def _entry_or_error(path: Path) -> HostEntry:
    """A report that cannot be used becomes its host's row with the reason, not the end of the view."""
    try:
        return read_entry(path)
    except FleetError as exc:
        return HostEntry(host=path.stem, unreachable=str(exc), path=str(path), error=True)


WATCH_SUFFIX = ".watch.json"
"""A host's `hostcheck watch report --format json` (playbooks/watch-report.yml), not an audit report."""


@dataclass
class FleetSource:
    """The report files named (directories read for `*.json`) and the hosts the index says
    have none; nothing is read from the reports yet."""

    files: list[Path]
    missing: list[HostEntry]

    def hosts(self) -> list[str]:
        return [e.host for e in self.missing] + [p.stem for p in self.files]

    def entries(self) -> Iterator[HostEntry]:
        """One host at a time: a report is read when its entry is wanted, and let go after."""
        yield from self.missing
        for path in self.files:
            yield _entry_or_error(path)


def fleet_source(paths: list[Path], suffix: str = ".json") -> FleetSource:
    """Directories are read for `*<suffix>` (audit reports: `*.json` but not `*.watch.json`);
    files are taken as given. A host named twice is refused before anything is read."""
    files: list[Path] = []
    missing: list[HostEntry] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.glob(f"*{suffix}") if p.name != INDEX_NAME)
            files.extend(p for p in found if suffix == WATCH_SUFFIX or not p.name.endswith(WATCH_SUFFIX))
            if suffix != WATCH_SUFFIX and (path / INDEX_NAME).exists():
                try:
                    missing.extend(read_index(path / INDEX_NAME))
                except FleetError as exc:
                    missing.append(HostEntry(host=INDEX_NAME, unreachable=str(exc), path=str(path / INDEX_NAME), error=True))
        elif path.exists():
            files.append(path)
        else:
            raise FleetError(f"{path}: no such file or directory")
    if not files and not missing:
        raise FleetError(f"no reports (*{suffix}) found in {', '.join(map(str, paths))}")
    seen: dict[str, str] = {}
    for host, where in [(e.host, e.path) for e in missing] + [(_host_of(p, suffix), str(p)) for p in files]:
        if host in seen:
            raise FleetError(f"host {host!r} appears twice: {seen[host]} and {where}")
        seen[host] = where
    return FleetSource(files, missing)


def _host_of(path: Path, suffix: str) -> str:
    return path.name.removesuffix(suffix) if path.name.endswith(suffix) else path.stem


def load_fleet(paths: list[Path]) -> list[HostEntry]:
    """Every host's entry, all held at once (the drift view compares two audits' reports)."""
    return list(fleet_source(paths).entries())


def redact_entries(entries: list[HostEntry]) -> Redactor:
    """``entries`` with every host name, address, user name... replaced, the same value by the
    same placeholder across all of them (old and new audits of ``fleet diff`` together); returns
    the redactor, for messages about them."""
    from hostcheck.redact import Redactor

    redactor = Redactor()
    for entry in entries:
        redactor.learn_host(entry.host, own=True)
        if entry.report is not None:
            redactor.learn(entry.report.facts)
    for entry in entries:
        redact_entry(entry, redactor)
    return redactor


def redact_entry(entry: HostEntry, redactor: Redactor) -> None:
    """One entry redacted in place with what ``redactor`` has learnt (and its own report's facts)."""
    from hostcheck.redact import redact

    if entry.report is not None:
        redactor.learn(entry.report.facts)
    entry.host = redactor.host(entry.host)
    entry.path = redactor.scrub(entry.path)
    if entry.unreachable is not None:
        entry.unreachable = redactor.scrub(entry.unreachable)
    if entry.report is not None:
        entry.report = redact(entry.report, redactor)
        entry.policies = {p.id: p for p in entry.report.policies}


def errors(entries: list[HostEntry]) -> list[str]:
    """Why each unusable report could not be read."""
    return [e.unreachable or "" for e in entries if e.error]


def _gpu_summary(facts: Any) -> dict[str, Any]:
    devices = listed_devices(facts)
    if isinstance(devices, list):
        devices = [d for d in devices if isinstance(d, dict)]
    if isinstance(devices, Unknown) or not isinstance(devices, list) or not devices:
        reason = devices.reason if isinstance(devices, Unknown) else "no GPU"
        return {"gpu": None, "vram_gib": None, "power": None, "gpu_reason": reason}
    first = devices[0]
    names = sorted({str(d.get("name")) for d in devices})
    gpu = f"{len(devices)}x {names[0]}" if len(names) == 1 else ", ".join(names)
    vram = first.get("vram_total_mib")
    limit, default = first.get("power_limit_w"), first.get("power_default_w")
    power = f"{limit:g}/{default:g} W" if isinstance(limit, (int, float)) and isinstance(default, (int, float)) else None
    return {"gpu": gpu, "vram_gib": round(vram / 1024, 1) if isinstance(vram, (int, float)) else None, "power": power, "gpu_reason": None}


def _bandwidth(facts: Any) -> Bandwidth:
    """Measured download/upload in Mbps (None where no speed test measured it)."""
    bw = measured_bandwidth(facts)
    out = Bandwidth(download_mbps=None, upload_mbps=None)
    if isinstance(bw, dict):
        for key in ("download_mbps", "upload_mbps"):
            value = bw.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                setattr(out, key, float(value))
    return out


def row_of(entry: HostEntry, policy_ids: list[str] | None = None) -> FleetRow:
    """A host's row: hardware summary, owner risk, and per policy verdict/score/blockers (every
    policy of its report when ``policy_ids`` is None)."""
    if entry.report is None:
        row = FleetRow(host=entry.host, reachable=False, reason=entry.unreachable, policies={})
        if entry.error:
            row.report_error = True  # set, so written: a good report's row has no such key
        return row
    report = entry.report
    facts = from_jsonable(report.facts)
    cells: dict[str, PolicyCell | None] = {}
    for pid in entry.policies if policy_ids is None else policy_ids:
        result = entry.policies.get(pid)
        cells[pid] = PolicyCell(verdict=result.verdict, score=result.score, blockers=result.blockers) if result else None
    return FleetRow(host=entry.host, reachable=True, hostcheck_version=report.tool.version,
                    generated_at=report.generated_at, owner_risk=report.owner_risk.rating,
                    **_gpu_summary(facts), bandwidth=_bandwidth(facts), policies=cells)


def fleet_rows(entries: list[HostEntry], policy_ids: list[str]) -> list[FleetRow]:
    """One row per host, with the policies ``policy_ids``."""
    return [row_of(entry, policy_ids) for entry in entries]


@dataclass
class FleetTable:
    rows: list[FleetRow]
    policy_ids: list[str]
    problems: list[str]  # why each unusable report could not be used


def read_table(source: FleetSource, policy_ids: list[str], redactor: Redactor | None = None) -> FleetTable:
    """The table's rows, reading one report at a time and keeping only its row, so memory
    stays bounded by the rows, whatever the count of hosts. Without ``policy_ids``, every
    policy any report holds, in the order first seen."""
    if redactor is not None:
        for host in source.hosts():
            redactor.learn_host(host, own=True)
    rows: list[FleetRow] = []
    seen: list[str] = []
    problems: list[str] = []
    for entry in source.entries():
        if redactor is not None:
            redact_entry(entry, redactor)
        seen.extend(pid for pid in entry.policies if pid not in seen)
        rows.append(row_of(entry, policy_ids or None))
        if entry.error:
            problems.append(entry.unreachable or "")
    ids = policy_ids or seen
    for row in rows:
        if row.reachable:
            row.policies = {pid: row.policies.get(pid) for pid in ids}
    return FleetTable(rows, ids, problems)


def sort_rows(rows: list[FleetRow], focus: str | None, by: str) -> list[FleetRow]:
    """Hosts that fail the focus policy first (unreachable first of all), then by `by`."""

    def key(row: FleetRow) -> tuple[Any, ...]:
        if not row.reachable:
            return (0, 0, 0, row.host)
        result = row.policies.get(focus) if focus else None
        failing = -VERDICT_RANK[result.verdict] if result else 0
        score = result.score if result else 0
        secondary = {"host": row.host, "score": score, "vram": -(row.vram_gib or 0)}.get(by, row.host)
        return (1, failing, secondary, row.host)

    return sorted(rows, key=key)


def all_policy_ids(entries: list[HostEntry]) -> list[str]:
    ids: list[str] = []
    for entry in entries:
        for pid in entry.policies:
            if pid not in ids:
                ids.append(pid)
    return ids


def _listening(report: Report) -> set[str]:
    try:
        sockets = listening_sockets(from_jsonable(report.facts))
    except Missing:
        return set()
    if not isinstance(sockets, list):
        return set()
    return {f"{s.get('proto')}/{s.get('port')} on {s.get('address')}" for s in sockets if isinstance(s, dict)}


def _by_host(entries: list[HostEntry], other: list[HostEntry]) -> dict[str, HostEntry]:
    """``entries`` keyed by the host that wrote each report (its hostname), so the same machine
    matches under any file name (before.json, after.json); by file name where the report names
    no host, names one that two reports share, or could not be read (then by the name the other
    side's report of that file gave)."""
    def named(entry: HostEntry) -> str | None:
        return entry.report.host.hostname if entry.report is not None and entry.report.host.hostname else None

    def unique(side: list[HostEntry]) -> dict[str, str]:
        """File name -> host name, for the reports whose host name no other report on that side shares."""
        names = [named(e) for e in side]
        return {e.host: n for e, n in zip(side, names, strict=True) if n is not None and names.count(n) == 1}

    own, alias = unique(entries), unique(other)
    out: dict[str, HostEntry] = {}
    for entry in sorted(entries, key=lambda e: e.host not in own):  # the named first: they own their key
        key = own.get(entry.host) or alias.get(entry.host) or entry.host
        out[key if key not in out else entry.host] = entry
    return out


def diff_fleets(old: list[HostEntry], new: list[HostEntry]) -> list[HostDrift]:
    """Per host: verdicts that flipped, findings that regressed or improved, new listening sockets."""
    old_by_host = _by_host(old, new)
    new_by_host = _by_host(new, old)
    changes = []
    for host in sorted(set(old_by_host) | set(new_by_host)):
        before, after = old_by_host.get(host), new_by_host.get(host)
        # Named as the fleet table names it (its file) where both audits agree on that name.
        files = {e.host for e in (before, after) if e is not None}
        item = HostDrift(host=files.pop() if len(files) == 1 else host, changes=[])
        if before is None:
            item.changes.append(Change(kind="host_added", detail="new in this audit"))
        elif after is None:
            item.changes.append(Change(kind="host_removed", detail="missing from this audit"))
        elif (before.report is None) != (after.report is None):
            state = f"no report: {after.unreachable}" if after.report is None else "reported again"
            item.changes.append(Change(kind="reachability", detail=state))
        elif before.report is not None and after.report is not None:
            item.changes.extend(_diff_reports(before, after))
        if item.changes:
            changes.append(item)
    return changes


def _diff_reports(before: HostEntry, after: HostEntry) -> list[Change]:
    assert before.report is not None and after.report is not None
    out: list[Change] = []
    for pid in sorted(set(before.policies) & set(after.policies)):
        old_p, new_p = before.policies[pid], after.policies[pid]
        if old_p.verdict != new_p.verdict:
            worse = VERDICT_RANK[new_p.verdict] > VERDICT_RANK[old_p.verdict]
            out.append(Change(kind="verdict_regressed" if worse else "verdict_improved", policy=pid,
                              detail=f"{old_p.verdict} -> {new_p.verdict}"))
    # A check judged by several policies changes once: group its change and name the policies.
    grouped: dict[tuple[str, Status, Status], list[str]] = {}
    titles: dict[str, str] = {}
    for pid in sorted(set(before.policies) & set(after.policies)):
        old_f = {f.id: f for f in before.policies[pid].findings}
        for finding in after.policies[pid].findings:
            previous = old_f.get(finding.id)
            if previous is None or previous.status == finding.status:
                continue
            titles[finding.id] = finding.title
            grouped.setdefault((finding.id, previous.status, finding.status), []).append(pid)
    for (check_id, was, now), pids in sorted(grouped.items()):
        worse = STATUS_RANK[now] > STATUS_RANK[was]
        out.append(Change(kind="finding_regressed" if worse else "finding_improved", check=check_id, policies=pids,
                          detail=f"{check_id} {titles[check_id]}: {was} -> {now} ({', '.join(pids)})"))
    old_risk, new_risk = before.report.owner_risk.rating, after.report.owner_risk.rating
    if old_risk != new_risk:
        out.append(Change(kind="owner_risk", detail=f"{old_risk} -> {new_risk}"))
    out.extend(_diff_bandwidth(before.report, after.report))
    out.extend(Change(kind=kind, detail=detail) for kind, detail in fact_changes(before.report, after.report))
    for socket in sorted(_listening(after.report) - _listening(before.report)):
        out.append(Change(kind="new_listening", detail=socket))
    for socket in sorted(_listening(before.report) - _listening(after.report)):
        out.append(Change(kind="closed_listening", detail=socket))
    return out


BANDWIDTH_CHANGE = 0.10
"""A speed test repeats within a few per cent; a change beyond this is drift worth a line."""


def _diff_bandwidth(before: Report, after: Report) -> list[Change]:
    old = _bandwidth(from_jsonable(before.facts))
    new = _bandwidth(from_jsonable(after.facts))
    out = []
    for key, name in (("download_mbps", "download"), ("upload_mbps", "upload")):
        was, now = getattr(old, key), getattr(new, key)
        if was is None and now is None:
            continue
        if was is None or now is None:
            detail = f"{name}: {'not measured' if was is None else f'{was:g} Mbps'} -> {'not measured' if now is None else f'{now:g} Mbps'}"
            out.append(Change(kind="bandwidth", detail=detail))
        elif abs(now - was) > BANDWIDTH_CHANGE * max(was, 1e-9):
            kind = "bandwidth_regressed" if now < was else "bandwidth_improved"
            out.append(Change(kind=kind, detail=f"{name}: {was:g} -> {now:g} Mbps"))
    return out
