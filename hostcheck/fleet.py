"""Fleet: read many hosts' JSON reports, compare them side by side, and show drift.

Input is what `playbooks/audit.yml` fetches: one `<host>.json` report per host, and an
`index.json` listing every host of the inventory with its outcome, so that a host that could
not be audited (unreachable, audit failed) is reported, not dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostcheck import safeio
from hostcheck.facts import Unknown, from_jsonable, lookup
from hostcheck.models import REPORT_VERSION, Status, Verdict

if TYPE_CHECKING:
    from hostcheck.redact import Redactor

INDEX_NAME = "index.json"
# How bad a change is: a rise in rank is a regression.
STATUS_RANK: dict[str, int] = {Status.PASS: 0, Status.SKIPPED: 0, Status.WARN: 1, Status.UNKNOWN: 2, Status.ERROR: 2, Status.FAIL: 3}
VERDICT_RANK: dict[str, int] = {Verdict.FEASIBLE: 0, Verdict.FEASIBLE_WITH_RISKS: 1, Verdict.UNDETERMINED: 2, Verdict.NOT_FEASIBLE: 3}


class FleetError(ValueError):
    """Input the fleet view cannot use (no reports, unreadable file, other report version)."""


@dataclass
class HostEntry:
    host: str
    report: dict[str, Any] | None = None
    unreachable: str | None = None  # reason, when the host could not be audited
    error: bool = False  # its report exists but cannot be used (unreachable says why)
    path: str = ""
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)


def _read_json(path: Path) -> Any:
    try:
        return safeio.load_json(path)
    except safeio.InputError as exc:
        raise FleetError(f"{path}: {exc}") from exc


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


def _require(path: Path, ok: bool, what: str) -> None:
    if not ok:
        raise FleetError(f"{path}: not a usable hostcheck report: {what}")


def _validate(path: Path, data: dict[str, Any]) -> None:
    """The shape the fleet view and the diff read, so that a damaged report is one row, not a crash."""
    for key in ("tool", "owner_risk", "facts"):
        _require(path, isinstance(data.get(key, {}), dict), f"'{key}' is not an object")
    policies = data.get("policies", [])
    _require(path, isinstance(policies, list), "'policies' is not a list")
    for index, policy in enumerate(policies):
        where = f"policies[{index}]"
        _require(path, isinstance(policy, dict), f"{where} is not an object")
        _require(path, isinstance(policy.get("id"), str), f"{where}.id is not a string")
        verdict = policy.get("verdict")
        _require(path, isinstance(verdict, str) and verdict in VERDICT_RANK, f"{where}.verdict is not a verdict")
        score = policy.get("score")
        _require(path, isinstance(score, (int, float)) and not isinstance(score, bool), f"{where}.score is not a number")
        blockers = policy.get("blockers")
        _require(path, isinstance(blockers, list) and all(isinstance(b, str) for b in blockers),
                 f"{where}.blockers is not a list of check ids")
        findings = policy.get("findings")
        _require(path, isinstance(findings, list), f"{where}.findings is not a list")
        for number, finding in enumerate(findings):
            _require(path, isinstance(finding, dict) and isinstance(finding.get("id"), str)
                     and isinstance(finding.get("title"), str) and isinstance(finding.get("status"), str)
                     and finding["status"] in STATUS_RANK,
                     f"{where}.findings[{number}] is not a finding")


def read_entry(path: Path) -> HostEntry:
    data = _read_json(path)
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
    _validate(path, data)
    entry = HostEntry(host=path.stem, report=data, path=str(path))
    entry.policies = {p["id"]: p for p in data.get("policies", [])}
    return entry


def _entry_or_error(path: Path) -> HostEntry:
    """A report that cannot be used becomes its host's row with the reason, not the end of the view."""
    try:
        return read_entry(path)
    except FleetError as exc:
        return HostEntry(host=path.stem, unreachable=str(exc), path=str(path), error=True)


def load_fleet(paths: list[Path]) -> list[HostEntry]:
    """Directories are read for `*.json`; files are taken as given."""
    files: list[Path] = []
    entries: list[HostEntry] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.glob("*.json") if p.name != INDEX_NAME))
            if (path / INDEX_NAME).exists():
                try:
                    entries.extend(read_index(path / INDEX_NAME))
                except FleetError as exc:
                    entries.append(HostEntry(host=INDEX_NAME, unreachable=str(exc), path=str(path / INDEX_NAME), error=True))
        elif path.exists():
            files.append(path)
        else:
            raise FleetError(f"{path}: no such file or directory")
    if not files and not entries:
        raise FleetError(f"no reports (*.json) found in {', '.join(map(str, paths))}")
    entries.extend(_entry_or_error(p) for p in files)
    seen: dict[str, str] = {}
    for entry in entries:
        if entry.host in seen:
            raise FleetError(f"host {entry.host!r} appears twice: {seen[entry.host]} and {entry.path}")
        seen[entry.host] = entry.path
    return entries


def redact_entries(entries: list[HostEntry]) -> Redactor:
    """``entries`` with every host name, address, user name... replaced, the same value by the
    same placeholder across all of them (old and new audits of ``fleet diff`` together); returns
    the redactor, for messages about them."""
    from hostcheck.redact import Redactor, redact

    redactor = Redactor()
    for entry in entries:
        redactor.learn_host(entry.host, own=True)
        if entry.report is not None and isinstance(entry.report.get("facts"), dict):
            redactor.learn(entry.report["facts"])
    for entry in entries:
        entry.host = redactor.host(entry.host)
        entry.path = redactor.scrub(entry.path)
        if entry.unreachable is not None:
            entry.unreachable = redactor.scrub(entry.unreachable)
        if entry.report is not None:
            entry.report = redact(entry.report, redactor)
            entry.policies = {p["id"]: p for p in entry.report.get("policies", [])}
    return redactor


def errors(entries: list[HostEntry]) -> list[str]:
    """Why each unusable report could not be read."""
    return [e.unreachable or "" for e in entries if e.error]


def _gpu_summary(facts: Any) -> dict[str, Any]:
    devices = lookup(facts, "gpu.devices")
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


def _bandwidth(facts: Any) -> dict[str, float | None]:
    """Measured download/upload in Mbps (None where no speed test measured it)."""
    bw = lookup(facts, "network.bandwidth")
    out: dict[str, float | None] = {"download_mbps": None, "upload_mbps": None}
    if isinstance(bw, dict):
        for key in out:
            value = bw.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = float(value)
    return out


def fleet_rows(entries: list[HostEntry], policy_ids: list[str]) -> list[dict[str, Any]]:
    """One row per host: hardware summary, owner risk, and per policy verdict/score/blockers."""
    rows = []
    for entry in entries:
        if entry.report is None:
            row: dict[str, Any] = {"host": entry.host, "reachable": False, "reason": entry.unreachable, "policies": {}}
            if entry.error:
                row["report_error"] = True
            rows.append(row)
            continue
        facts = from_jsonable(entry.report.get("facts", {}))
        row = {
            "host": entry.host,
            "reachable": True,
            "hostcheck_version": entry.report.get("tool", {}).get("version"),
            "generated_at": entry.report.get("generated_at"),
            "owner_risk": entry.report.get("owner_risk", {}).get("rating"),
            **_gpu_summary(facts),
            "bandwidth": _bandwidth(facts),
            "policies": {},
        }
        for pid in policy_ids:
            result = entry.policies.get(pid)
            row["policies"][pid] = (
                {"verdict": result["verdict"], "score": result["score"], "blockers": result["blockers"]}
                if result
                else None
            )
        rows.append(row)
    return rows


def sort_rows(rows: list[dict[str, Any]], focus: str | None, by: str) -> list[dict[str, Any]]:
    """Hosts that fail the focus policy first (unreachable first of all), then by `by`."""

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        if not row["reachable"]:
            return (0, 0, 0, row["host"])
        result = row["policies"].get(focus) if focus else None
        failing = -VERDICT_RANK[result["verdict"]] if result else 0
        score = result["score"] if result else 0
        secondary = {"host": row["host"], "score": score, "vram": -(row.get("vram_gib") or 0)}.get(by, row["host"])
        return (1, failing, secondary, row["host"])

    return sorted(rows, key=key)


def all_policy_ids(entries: list[HostEntry]) -> list[str]:
    ids: list[str] = []
    for entry in entries:
        for pid in entry.policies:
            if pid not in ids:
                ids.append(pid)
    return ids


def _listening(report: dict[str, Any]) -> set[str]:
    sockets = lookup(from_jsonable(report.get("facts", {})), "network.listening")
    if not isinstance(sockets, list):
        return set()
    return {f"{s.get('proto')}/{s.get('port')} on {s.get('address')}" for s in sockets if isinstance(s, dict)}


def diff_fleets(old: list[HostEntry], new: list[HostEntry]) -> list[dict[str, Any]]:
    """Per host: verdicts that flipped, findings that regressed or improved, new listening sockets."""
    old_by_host = {e.host: e for e in old}
    new_by_host = {e.host: e for e in new}
    changes = []
    for host in sorted(set(old_by_host) | set(new_by_host)):
        before, after = old_by_host.get(host), new_by_host.get(host)
        item: dict[str, Any] = {"host": host, "changes": []}
        if before is None:
            item["changes"].append({"kind": "host_added", "detail": "new in this audit"})
        elif after is None:
            item["changes"].append({"kind": "host_removed", "detail": "missing from this audit"})
        elif (before.report is None) != (after.report is None):
            state = f"no report: {after.unreachable}" if after.report is None else "reported again"
            item["changes"].append({"kind": "reachability", "detail": state})
        elif before.report is not None and after.report is not None:
            item["changes"].extend(_diff_reports(before, after))
        if item["changes"]:
            changes.append(item)
    return changes


def _diff_reports(before: HostEntry, after: HostEntry) -> list[dict[str, Any]]:
    assert before.report is not None and after.report is not None
    out: list[dict[str, Any]] = []
    for pid in sorted(set(before.policies) & set(after.policies)):
        old_p, new_p = before.policies[pid], after.policies[pid]
        if old_p["verdict"] != new_p["verdict"]:
            worse = VERDICT_RANK[new_p["verdict"]] > VERDICT_RANK[old_p["verdict"]]
            out.append({"kind": "verdict_regressed" if worse else "verdict_improved", "policy": pid,
                        "detail": f"{old_p['verdict']} -> {new_p['verdict']}"})
    # A check judged by several policies changes once: group its change and name the policies.
    grouped: dict[tuple[str, str, str], list[str]] = {}
    titles: dict[str, str] = {}
    for pid in sorted(set(before.policies) & set(after.policies)):
        old_f = {f["id"]: f for f in before.policies[pid]["findings"]}
        for finding in after.policies[pid]["findings"]:
            previous = old_f.get(finding["id"])
            if previous is None or previous["status"] == finding["status"]:
                continue
            titles[finding["id"]] = finding["title"]
            grouped.setdefault((finding["id"], previous["status"], finding["status"]), []).append(pid)
    for (check_id, was, now), pids in sorted(grouped.items()):
        worse = STATUS_RANK[now] > STATUS_RANK[was]
        out.append({
            "kind": "finding_regressed" if worse else "finding_improved", "check": check_id, "policies": pids,
            "detail": f"{check_id} {titles[check_id]}: {was} -> {now} ({', '.join(pids)})",
        })
    old_risk = before.report.get("owner_risk", {}).get("rating")
    new_risk = after.report.get("owner_risk", {}).get("rating")
    if old_risk != new_risk:
        out.append({"kind": "owner_risk", "detail": f"{old_risk} -> {new_risk}"})
    out.extend(_diff_bandwidth(before.report, after.report))
    for socket in sorted(_listening(after.report) - _listening(before.report)):
        out.append({"kind": "new_listening", "detail": socket})
    for socket in sorted(_listening(before.report) - _listening(after.report)):
        out.append({"kind": "closed_listening", "detail": socket})
    return out


BANDWIDTH_CHANGE = 0.10
"""A speed test repeats within a few per cent; a change beyond this is drift worth a line."""


def _diff_bandwidth(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    old = _bandwidth(from_jsonable(before.get("facts", {})))
    new = _bandwidth(from_jsonable(after.get("facts", {})))
    out = []
    for key, name in (("download_mbps", "download"), ("upload_mbps", "upload")):
        was, now = old[key], new[key]
        if was is None and now is None:
            continue
        if was is None or now is None:
            detail = f"{name}: {'not measured' if was is None else f'{was:g} Mbps'} -> {'not measured' if now is None else f'{now:g} Mbps'}"
            out.append({"kind": "bandwidth", "detail": detail})
        elif abs(now - was) > BANDWIDTH_CHANGE * max(was, 1e-9):
            kind = "bandwidth_regressed" if now < was else "bandwidth_improved"
            out.append({"kind": kind, "detail": f"{name}: {was:g} -> {now:g} Mbps"})
    return out
