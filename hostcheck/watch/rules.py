"""Each platform's published reliability rule applied to a recording's reduction (the rules are
data). Pure: the audit's REL checks call it on the facts a collector recorded, `hostcheck watch
report` on the analysis it reads, so a saved recording is judged by today's rules. A threshold the
audit judges against is read from that platform's policy (the one place it is written)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from hostcheck import yaml_loader
from hostcheck.models import SourceEntry
from hostcheck.recording.analysis import DOWN_CAUSES, NOT_RECORDED, UP, Analysis, Segment
from hostcheck.wording import counted

RULES_PATH = Path(__file__).with_name("platform_rules.yaml")


@cache
def rules() -> dict[str, dict[str, Any]]:
    """The rules, each source checked against the one source format (and its dates as text); a
    rule whose threshold a policy gives (``threshold_from: {policy, check}``) gets it from there,
    as a fraction."""
    data = yaml_loader.safe_load(RULES_PATH.read_text(encoding="utf-8"))
    out = {}
    for rule_id, rule in data["rules"].items():
        rule = {**rule, "sources": [SourceEntry.model_validate(src).model_dump(mode="json", exclude_none=True)
                                    for src in rule["sources"]]}
        if "threshold_from" in rule:
            rule["threshold"] = policy_threshold(**rule["threshold_from"]) / 100
        out[rule_id] = rule
    return out


def policy_threshold(policy: str, check: str) -> float:
    """The threshold (a percentage) the shipped policy ``policy`` sets for ``check`` (the shipped
    file, which the policy tests validate; the audit judges by whichever policy it is given)."""
    text = (resources.files("hostcheck") / "policies" / f"{policy}.yaml").read_text(encoding="utf-8")
    (value,) = [r["threshold"] for r in yaml_loader.safe_load(text)["requirements"] if r["check"] == check]
    return float(value)


def runpod_rule() -> dict[str, Any]:
    return rules()["runpod"]


@dataclass
class RuleScore:
    rule_id: str
    platform: str
    score: float | None  # a fraction where the rule gives one
    verdict: str  # "meets" | "below" | "unknown"
    summary: str
    rule: dict[str, Any]
    numbers: dict[str, Any] = field(default_factory=dict)


def runpod_score(up_minutes: float, total_minutes: float, buffer_minutes: float) -> float:
    """Runpod's formula: (total_minutes - downtime_minutes + buffer) / total_minutes, capped at 1."""
    return min(1.0, (up_minutes + buffer_minutes) / total_minutes)


def _clipped(segments: list[Segment], seconds: float) -> tuple[float, float]:
    """(up, down) seconds in the last ``seconds`` of the window."""
    if not segments:
        return 0.0, 0.0
    lower = segments[-1].end - seconds
    up = down = 0.0
    for seg in segments:
        part = max(0.0, seg.end - max(seg.start, lower))
        if seg.state == UP:
            up += part
        elif seg.state in DOWN_CAUSES:
            down += part
    return up, down


def score_runpod(rule_id: str, rule: dict[str, Any], a: Analysis) -> RuleScore:
    return runpod_over(rule_id, rule, a.segments, rule["threshold"])


def runpod_over(rule_id: str, rule: dict[str, Any], segments: list[Segment], threshold: float) -> RuleScore:
    """Runpod's formula is defined on its 30-day window (43,200 minutes, a 10-minute buffer
    once per window), so it is applied as written only to 30 observed days. A shorter
    recording is not enough data: scaling the buffer or the window to it would be hostcheck's
    invention, and the fixed buffer over a short window inflates the score (it lifts 71 % of one
    day above 98 %). What a short recording does settle: its downtime falls inside any 30-day
    window that contains it, so the 30-day score can be at most
    (43200 - downtime + buffer) / 43200; when that is already under the threshold the verdict
    is "below" now, else "unknown" with that best case and the rate so far, extended to 30
    days (an extrapolation, labelled as such)."""
    window_min = rule["window_days"] * 1440.0
    up_s, down_s = _clipped(segments, window_min * 60.0)
    not_recorded_s = sum(seg.seconds for seg in segments if seg.state == NOT_RECORDED)
    up, down = up_s / 60.0, down_s / 60.0
    total = up + down
    if total <= 0:
        return RuleScore(rule_id, rule["platform"], None, "unknown", "nothing recorded", rule)
    days = total / 1440.0
    buffer = rule["buffer_minutes"]
    numbers: dict[str, Any] = {"up_minutes": round(up, 1), "down_minutes": round(down, 1), "total_minutes": round(total, 1),
                               "window_minutes": window_min, "buffer_minutes": buffer}  # fmt: skip
    left_out = f"; {not_recorded_s / 60:.1f} min not recorded are left out" if not_recorded_s > 0 else ""
    if total >= window_min - 1.0:
        score = runpod_score(up, total, buffer)
        verdict = "meets" if score >= threshold else "below"
        return RuleScore(rule_id, rule["platform"], score, verdict,
                         f"{score * 100:.2f} % over the last {rule['window_days']} days, against {threshold * 100:g} %{left_out}",
                         rule, numbers)  # fmt: skip
    best = runpod_score(window_min - down, window_min, buffer)
    at_rate = runpod_score(window_min - down * window_min / total, window_min, buffer)
    numbers.update(best_pct=round(best * 100, 4), at_rate_pct=round(at_rate * 100, 4))
    if best < threshold:
        return RuleScore(rule_id, rule["platform"], best, "below",
                         f"{down:.0f} min down in {days:.1f} days: any {rule['window_days']}-day window holding them scores at "
                         f"most {best * 100:.2f} %, under {threshold * 100:g} %{left_out}", rule, numbers)  # fmt: skip
    return RuleScore(
        rule_id, rule["platform"], None, "unknown",
        f"not enough data: {days:.1f} of {rule['window_days']} days; the {rule['window_days']}-day score can still reach "
        f"{best * 100:.2f} % (no more downtime), {at_rate * 100:.2f} % if downtime goes on at the rate recorded "
        f"(an extrapolation){left_out}", rule, numbers,
    )  # fmt: skip


def level_needs_s(level: float, interval_s: float | None, min_s: float) -> float:
    """How long a recording must be before its uptime can be compared with ``level``: at least
    ``min_s``, and long enough that one unseen outage of a sampling interval would take it below
    the level (interval / (1 - level))."""
    if level >= 1 or not interval_s:
        return min_s
    return max(min_s, interval_s / (1 - level))


def score_vast(rule_id: str, rule: dict[str, Any], a: Analysis) -> RuleScore:
    uptime = a.uptime
    if uptime is None:
        return RuleScore(rule_id, rule["platform"], None, "unknown", "nothing recorded", rule)
    min_s = rule["min_days"] * 86400.0
    observed = a.observed_s
    numbers = {"uptime": uptime, "observed_s": round(observed, 1), "min_s": min_s}
    so_far = f"measured uptime {uptime * 100:.2f} % over {_hours(observed)}"
    unpublished = "a new listing still starts at {:g} % (Vast's own score is not published)".format(rule["start"] * 100)
    if observed < min_s:
        return RuleScore(rule_id, rule["platform"], None, "unknown",
                         f"not enough data: {so_far}; hostcheck compares with Vast's levels from "
                         f"{rule['min_days']:g} day of samples (Vast publishes no window); {unpublished}",
                         rule, numbers)  # fmt: skip
    favoured, verification = rule["favoured"], rule["verification"]
    favoured_s = level_needs_s(favoured, a.interval_s, min_s)
    if uptime >= favoured and observed >= favoured_s:
        verdict, words = "meets", f"at or above the favoured {favoured * 100:g} %"
    elif uptime >= verification:
        verdict, words = "meets", f"above verification's {verification * 100:g} %"
        if uptime >= favoured:
            words += (f"; the favoured {favoured * 100:g} % needs {_hours(favoured_s)} of samples every "
                      f"{a.interval_s:g} s to tell apart")
        else:
            words += f", below the favoured {favoured * 100:g} %"
    else:
        verdict, words = "below", f"below verification's {verification * 100:g} %"
    return RuleScore(rule_id, rule["platform"], uptime, verdict, f"{so_far}: {words}; {unpublished}", rule, numbers)


def _hours(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.2f} s"


def score_continuous(rule_id: str, rule: dict[str, Any], a: Analysis) -> RuleScore:
    need_s = rule["min_hours"] * 3600.0
    current, longest = a.current_up_s(), a.longest_up_s()
    if a.window_end is None:
        return RuleScore(rule_id, rule["platform"], None, "unknown", "nothing recorded", rule)
    resets = len(a.outages)
    verdict = "meets" if current > need_s else "below"
    recorded_s = a.window_end - a.window_start if a.window_start is not None else 0.0
    if verdict == "below" and not resets and recorded_s < need_s:
        # No outage seen and a recording shorter than the run asked for: the machine may have been
        # up for longer before it started, so "below" would be a guess.
        return RuleScore(rule_id, rule["platform"], None, "unknown",
                         f"not enough data: {_hours(recorded_s)} recorded, no outage; needs a run of more than "
                         f"{rule['min_hours']:g} h", rule,
                         {"current_up_h": round(current / 3600, 2), "longest_up_h": round(longest / 3600, 2),
                          "resets": resets})
    return RuleScore(
        rule_id, rule["platform"], None, verdict,
        f"up continuously for {_hours(current)} now (needs more than {rule['min_hours']:g} h); "
        f"longest run {_hours(longest)}; {counted(resets, 'outage')} reset the count",
        rule, {"current_up_h": round(current / 3600, 2), "longest_up_h": round(longest / 3600, 2), "resets": resets},
    )  # fmt: skip


SCORERS = {"runpod_formula": score_runpod, "levels": score_vast, "continuous": score_continuous}


def score_all(a: Analysis) -> list[RuleScore]:
    return [SCORERS[rule["kind"]](rule_id, rule, a) for rule_id, rule in rules().items()]
