"""The earnings estimate: from checked inputs, facts and power figures to the report, for
``hostcheck earnings`` and for the audit's closing lines (``hostcheck.render.earnings.audit``
writes them). The commands parse the options; this is what they call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostcheck.earnings import model as m
from hostcheck.earnings.build import build_earnings
from hostcheck.earnings.config import load_config
from hostcheck.earnings.data import PlatformDocument, load_all_platforms, load_constants
from hostcheck.earnings.inputs import Given, build, config_path
from hostcheck.earnings.report import ACCEPTS, Machine, PowerOut
from hostcheck.errors import EarningsInputError, EarningsMissingError
from hostcheck.exit_codes import earnings_exit
from hostcheck.models import OWNER_RISK_STOPS, VERDICT_RANK, Report, Status
from hostcheck.wording import counted

if TYPE_CHECKING:
    from hostcheck.collectors.power_draw import PowerReadings

# Takes this machine's power readings; handed in by the command, called once the input is known good.
PowerSampler = Callable[[], "PowerReadings"]

__all__ = ["audit_earnings", "audit_values", "merged_values", "run"]


def merged_values(flags: dict[str, Any], config: Path | None, use_config: bool = True) -> tuple[dict[str, Any], Path | None]:
    """Config file values overlaid by the flags that were given (None: not given)."""
    path = config if config is not None else (config_path() if use_config else None)
    values: dict[str, Any] = {}
    if path is not None:
        values = load_config(path)
        values["_from_config"] = tuple(values)
    for key, value in flags.items():
        if value is not None and value != []:
            values[key] = value
    return values, path


def _power(facts: dict[str, Any] | None, given: Given, sampler: PowerSampler | None) -> Any:
    from hostcheck.measure.power_estimate import estimate_power

    return estimate_power(facts or {"meta": {"facts_format": 1}}, readings=sampler() if sampler else None,
                          wall_idle_w=given.wall_idle_w, wall_load_w=given.wall_load_w)


def _audit_gpus(report: Report | None) -> Any:
    """The GPUs the audit counted (its working-NVIDIA-GPU check's measure), or None where it did not count them."""
    from hostcheck.checks.base import id_of
    from hostcheck.checks.gpu import gpu_present

    present = id_of(gpu_present)
    for policy in report.policies if report is not None else []:
        for finding in policy.findings:
            if finding.id == present and finding.status in (Status.PASS, Status.FAIL):
                return finding.measured
    return None


def _gpus(facts: dict[str, Any] | None, given: Given, notes: list[str],
          report: Report | None = None) -> tuple[int, str | None]:
    if given.gpus is None and _audit_gpus(report) == 0:
        notes.append("the audit counts no working NVIDIA GPU on this machine: nothing to rent by the GPU-hour, so "
                     "no platform is priced (give --gpus N to price a machine with N)")
        return 0, None
    devices = (facts or {}).get("gpu", {}).get("devices") if isinstance((facts or {}).get("gpu"), dict) else None
    if isinstance(devices, list) and devices:
        names = {str(d["name"]) for d in devices if isinstance(d, dict) and isinstance(d.get("name"), str)}
        if given.gpus is not None and given.gpus != len(devices):
            notes.append(f"--gpus {given.gpus} used; the facts list {counted(len(devices), 'GPU')}")
            return given.gpus, None
        return len(devices), ", ".join(sorted(names)) or None
    if given.gpus is None:
        notes.append("GPU count not known from facts: 1 assumed (give --gpus)")
        return 1, None
    return given.gpus, None


def accepts(doc: PlatformDocument) -> list[str]:
    """What the platform's audit policies say it takes (one of ACCEPTS per policy, in that
    order): closed to new hosts (the platform-accepts check), Apple Silicon (the Apple Silicon
    check), Windows (an OS list of Windows releases only), else NVIDIA on Linux. Read from the
    policies, so each fact about a platform stays declared once, with its source."""
    from hostcheck.checks import load_registry
    from hostcheck.checks.machine import apple_silicon, os_supported
    from hostcheck.checks.network import platform_accepts
    from hostcheck.policy import load_shipped

    check_of = {meta.func: check_id for check_id, meta in load_registry().items()}
    closed, apple, os_list = check_of[platform_accepts], check_of[apple_silicon], check_of[os_supported]
    found = set()
    for policy_id in doc.policies:
        checks = {r.check: r.threshold for r in load_shipped(policy_id).requirements}
        if closed in checks:
            found.add(ACCEPTS[3])
        elif apple in checks:
            found.add(ACCEPTS[2])
        elif checks.get(os_list) and all(str(t).lower().startswith("windows") for t in checks[os_list]):
            found.add(ACCEPTS[1])
        else:
            found.add(ACCEPTS[0])
    return [a for a in ACCEPTS if a in found]


def _verdicts(report: Report | None, docs: list[PlatformDocument], notes: list[str],
              asked: bool = False) -> list[tuple[PlatformDocument, str | None]]:
    """Each platform with the audit's best verdict among its policies. Unless the owner named
    the platforms, those the audit says cannot apply to this machine are left out (and said)."""
    if report is None:
        return [(doc, None) for doc in docs]
    by_id = {p.id: p for p in report.policies}
    out = []
    skipped = []
    for doc in docs:
        judged = [by_id[pid] for pid in doc.policies if pid in by_id]
        if judged and not asked and not any(p.applicable for p in judged):
            skipped.append(f"{doc.platform} ({judged[0].precondition})")
            continue
        # The verdict quoted is one of a policy that applies (salad-linux, not Windows-only salad).
        judged = [p for p in judged if p.applicable] or judged
        best = min(judged, key=lambda p: VERDICT_RANK[p.verdict]) if judged else None
        out.append((doc, f"{best.id}: {best.verdict}" if best else None))
    if skipped:
        notes.append(f"not priced, the audit says they cannot apply to this machine: {'; '.join(skipped)}")
    return out


def run(values: dict[str, Any], *, facts: dict[str, Any] | None, source: str, platforms: list[str],
        power_sampler: PowerSampler | None = None, config: Path | None = None,
        audit_report: Report | None = None) -> tuple[dict[str, Any], int]:
    """The earnings report and its exit code (hostcheck.exit_codes.EARNINGS_ORDER: owner risk first, then an
    unknown draw under load). Raises EarningsInputError or EconomicsDataError on bad input."""
    constants = load_constants()
    given = build(values, constants, config)
    docs = load_all_platforms()
    if platforms:
        known = {d.platform: d for d in docs}
        unknown = [p for p in platforms if p not in known]
        if unknown:
            raise EarningsInputError(f"--platform: no platform data named {unknown[0]!r} (shipped: {', '.join(known)})")
        docs = [known[p] for p in dict.fromkeys(platforms)]
    _check_platform_names(given.platform_price)
    notes: list[str] = []
    if facts is not None and audit_report is None:
        from hostcheck.policy import resolve_policies
        from hostcheck.report import build_report

        audit_report = build_report(facts, resolve_policies([]))
    estimate = _power(facts, given, power_sampler)
    gpus, gpu_name = _gpus(facts, given, notes, audit_report)
    # The parts (GPU, CPU, the rest) only explain a whole-machine figure that is estimated from
    # them: beside two wall readings the owner gave they would be guesses at what was measured.
    both_given = given.wall_idle_w is not None and given.wall_load_w is not None
    names = ("wall_idle", "wall_load") if both_given else \
        ("wall_idle", "wall_load", "gpu_idle", "gpu_load", "cpu_package", "rest_of_system")
    power = {name: PowerOut.model_validate({"watts": None if fig.watts is None else round(fig.watts, 2),
                                            "provenance": str(fig.provenance), "how": fig.how})
             for name in names for fig in [getattr(estimate, name)]}
    load, idle = estimate.wall_load.watts, estimate.wall_idle.watts
    powers = None
    if load is not None:
        if idle is None:
            notes.append("idle draw unknown: shown as a range from 0 W (best) to the draw under load (worst); "
                         "give --wall-idle-w for one figure")
            powers = (m.Power(idle_w=load, load_w=load, gpus=gpus), m.Power(idle_w=0.0, load_w=load, gpus=gpus))
        else:
            # The power module orders the two (the draw under load is at least the idle draw) and
            # never replaces a reading the owner gave; say where an estimate gave way to one.
            p = m.Power(idle_w=idle, load_w=load, gpus=gpus)
            powers = (p, p)
            if estimate.ordering:
                notes.append(f"{estimate.ordering}; give --wall-load-w and --wall-idle-w from a wall-socket meter "
                             "for measured figures")
    else:
        notes.append(f"draw under load unknown ({estimate.wall_load.how}): no money figure can be computed; "
                     "give --wall-load-w and --wall-idle-w from a wall-socket meter or smart plug")
    if given.owner.tariff.peak != given.owner.tariff.mean:
        notes.append("day/night tariff: costs use the hour-weighted mean price, which assumes rentals are spread "
                     "evenly over the day [inference]; the minimum-bid floor uses the dearest hour")
    if values.get("heating_months") is not None and given.owner.heating.kind == "none":
        notes.append("heating months given but no heating (--heating none): no heat credit counted")
    if given.owner.baseline_w:
        notes.append("baseline: only the draw above what the machine would draw anyway is charged to hosting, "
                     "and never less than zero per state [deviation from the notes' formula]")
    if given.owner.tax:
        notes.append("tax applies to the net before heat, and a loss reduces tax at the same rate [inference: "
                     "treatment varies by country]")
    if not given.money_bounded:
        notes.append(f"{given.currency} is not in hostcheck's table of currencies (policies/economics/constants.yaml): "
                     "money figures were checked only for being positive and finite, not against an upper bound")
    notes.append("ranges (worst to best) come from what is not known: the fee where a platform publishes none "
                 "or its pages disagree, and the idle draw where it is unknown")
    if audit_report is not None:
        hostname = audit_report.host.hostname or "this host"
        machine = Machine.model_validate({"from": source if source != "this machine" else hostname, "gpus": gpus,
                                          "gpu_name": gpu_name, "audit_headline": audit_report.headline,
                                          "owner_risk": audit_report.owner_risk.rating.value})
    else:
        machine = Machine.model_validate({"from": source, "gpus": gpus, "gpu_name": gpu_name,
                                          "audit_headline": None, "owner_risk": None})
    # No GPU to rent: no platform is priced (the note above says why and how to price one anyway).
    shown = [(doc, verdict, accepts(doc)) for doc, verdict in _verdicts(audit_report, docs, notes, asked=bool(platforms))
             if gpus > 0]
    report = build_earnings(given=given, constants=constants, platforms=shown, power=power, powers=powers,
                            machine=machine, notes=notes, price_closed=bool(platforms))
    return report, earnings_exit(owner_risk_stops=machine.owner_risk in OWNER_RISK_STOPS, power_known=powers is not None)


def _check_platform_names(prices: dict[str, Any]) -> None:
    known = {d.platform for d in load_all_platforms()}
    for name in prices:
        if name not in known:
            raise EarningsInputError(f"--platform-price: no platform data named {name!r} (shipped: {', '.join(sorted(known))})")


def audit_values(flags: dict[str, Any], config: Path | None) -> tuple[dict[str, Any], Path | None] | None:
    """The owner's earnings inputs for the audit (flags over the config file), checked before
    anything is collected; None when there are none. Raises EarningsInputError for a value or file
    that is wrong, never for one that is missing: the audit still prints its report, and its
    closing line says what is missing."""
    if all(v is None for v in flags.values()) and config is None and config_path() is None:
        return None
    values, path = merged_values(flags, config)
    try:
        build(values, load_constants(), path)
    except EarningsMissingError:
        pass
    _check_platform_names(values.get("platform_price") or {})
    return values, path


def audit_earnings(audit_report: Report, facts: dict[str, Any], values: dict[str, Any],
                   config: Path | None) -> dict[str, Any]:
    """The earnings report behind the audit's closing lines, judged with the audit's own report
    (its headline and an owner-risk warning stand, and so does its exit code). Raises
    EarningsMissingError when an input is missing, to be said in those lines."""
    report, _ = run(values, facts=facts, source="audit", platforms=[], config=config, audit_report=audit_report)
    return report
