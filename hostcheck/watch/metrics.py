"""What the recorder exports to Prometheus: the metric families, computed from the store.

Pure: :class:`MetricsState` reads what the recorder wrote (new samples and events, by row id,
and now and then a window analysis of the recording) and :func:`families` turns that into
metric families; :mod:`hostcheck.watch.textfile` writes them out. :data:`CATALOG` declares
every metric once (name, type, unit, labels, meaning): docs/watch.md's metric list is
generated from it, and a family that is not declared there is never written.

Names follow Prometheus's naming rules: one ``hostcheck_watch_`` prefix, base units (seconds,
ratios 0-1, watts, degrees Celsius), ``_total`` only on counters, ``_info`` for a value carried
in a label. Counters count from the recorder's start (Prometheus's ``increase()`` and
``rate()`` handle a restart); the ``window`` gauges are recomputed from the recording.

Labels are bounded: causes, verdicts, effects and reasons are fixed sets, ``rule`` a key of
platform_rules.yaml, ``gpu`` an NVML index, ``port``/``proto`` the owner's at most 8 forwarded
ports. No free text ever goes into a label; the public address only when the owner asks for it.

dcgm-exporter's names (``DCGM_FI_DEV_GPU_TEMP``, ``DCGM_FI_DEV_POWER_USAGE``,
``DCGM_FI_DEV_XID_ERRORS``) are left to dcgm-exporter: the readings here carry the
``hostcheck_watch_`` prefix, so both can run on one host without a clash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hostcheck.models import InboundResult
from hostcheck.recording.analysis import DOWN_CAUSES, UP, Analysis, sample_state
from hostcheck.recording.store import Sample
from hostcheck.watch.rules import RuleScore

WINDOWS: dict[str, float] = {"1d": 86400.0, "7d": 7 * 86400.0, "30d": 30 * 86400.0}
"""The windows the outage gauges cover; 30 days is Runpod's rule's window, the longest of the rules."""
LIVE_STATES = (UP, "network", "driver")
"""What one sample can show; a power cut, a reboot or a suspend is only seen once it is over."""
VERDICTS = ("meets", "below", "unknown")
EFFECTS = ("out_of_service", "app", "attention", "none")
THROTTLE_REASONS = ("thermal", "power")
ECC_TYPES = ("corrected", "uncorrected")
CGNAT_VERDICTS = ("yes", "likely", "no", "unknown")
OUT_OF_SERVICE = "out of service since"
"""How the recorder's sample says an Xid this boot took the GPU out of service."""


@dataclass(frozen=True)
class MetricDef:
    name: str
    type: str  # "gauge" | "counter"
    help: str
    labels: tuple[str, ...] = ()


def _m(name: str, type_: str, help_: str, *labels: str) -> MetricDef:
    return MetricDef(f"hostcheck_watch_{name}", type_, help_, labels)


CATALOG: tuple[MetricDef, ...] = (
    _m("up", "gauge", "1 when the last sample found the host up (network and GPU answering), 0 when it found it down."),
    _m("state", "gauge", "1 for what the last sample found: up, network (every target failed) or driver (NVML failed, or an Xid that takes the GPU out of service).", "cause"),
    _m("last_sample_timestamp_seconds", "gauge", "Unix time of the last sample written; a recorder that stopped leaves it behind."),
    _m("sample_interval_seconds", "gauge", "The recorder's interval between samples."),
    _m("recorder_start_timestamp_seconds", "gauge", "Unix time this recorder run started."),
    _m("samples_total", "counter", "Samples written by this recorder run."),
    _m("current_up_seconds", "gauge", "How long the host has been up without a break, as io.net's rule counts it (0 while down)."),
    _m("window_observed_seconds", "gauge", "Up plus down time recorded in the window (time not recorded is left out).", "window"),
    _m("window_not_recorded_seconds", "gauge", "Time in the window when nothing was recorded (the recorder stopped, or could not write).", "window"),
    _m("window_uptime_ratio", "gauge", "Up time over observed time in the window (0-1).", "window"),
    _m("window_outages", "gauge", "Outages in the window, by cause (power is an unclean stop).", "window", "cause"),
    _m("window_down_seconds", "gauge", "Down time in the window, by cause.", "window", "cause"),
    _m("analysis_timestamp_seconds", "gauge", "Unix time the window gauges and platform scores were last computed."),
    _m("platform_score_ratio", "gauge", "The platform rule's score where it gives one (0-1); a recording too short for the rule's window has none.", "rule"),
    _m("platform_projected_ratio", "gauge", "The score the rule heads for if downtime goes on at the recorded rate (an extrapolation; Runpod's 30-day score before 30 days are recorded, Vast's measured uptime).", "rule"),
    _m("platform_threshold_ratio", "gauge", "The level the rule's score must reach (0-1).", "rule"),
    _m("platform_verdict", "gauge", "1 for the rule's verdict now: meets, below or unknown (not enough data).", "rule", "verdict"),
    _m("gpu_out_of_service", "gauge", "1 when an Xid this boot needs a GPU reset or a reboot (NVIDIA's catalogue), until one happens."),
    _m("gpu_faults_total", "counter", "Kernel Xid lines seen by this recorder run, by what NVIDIA's catalogue says they need: out_of_service (reset or reboot), app (restart the application), attention (look at it), none.", "effect"),
    _m("gpu_throttled_seconds_total", "counter", "Time NVML's violation counters say the GPU was slowed down, by reason (thermal, power cap), since this recorder run started.", "gpu", "reason"),
    _m("gpu_temperature_celsius", "gauge", "GPU temperature at the last sample (the reading dcgm-exporter calls DCGM_FI_DEV_GPU_TEMP).", "gpu"),
    _m("gpu_power_watts", "gauge", "GPU power draw at the last sample (the reading dcgm-exporter calls DCGM_FI_DEV_POWER_USAGE).", "gpu"),
    _m("gpu_ecc_errors_total", "counter", "New ECC errors since this recorder run started (volatile counts; GPUs without ECC have none).", "gpu", "type"),
    _m("cgnat", "gauge", "1 for the CGNAT re-check's last verdict (yes, likely, no, unknown); absent without STUN servers.", "verdict"),
    _m("public_address_changes_total", "counter", "Changes of the public address (STUN) seen by this recorder run."),
    _m("public_address_info", "gauge", "The public address STUN last saw, as a label (only with --textfile-address).", "address"),
    _m("forwarded_port_reachable", "gauge", "1 when the last outside check reached the forwarded port, 0 when it did not; absent when the check could not tell.", "port", "proto"),
    _m("forwarded_ports_check_timestamp_seconds", "gauge", "Unix time of the last outside check of the forwarded ports."),
)
BY_NAME = {m.name: m for m in CATALOG}


@dataclass
class Family:
    meta: MetricDef
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, **labels: str) -> None:
        if set(labels) != set(self.meta.labels):
            raise ValueError(f"{self.meta.name}: labels {sorted(labels)}, declared {list(self.meta.labels)}")
        self.samples.append((labels, float(value)))


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass
class Window:
    """The window gauges and platform scores of one analysis."""

    at: float
    observed_s: dict[str, float]
    not_recorded_s: dict[str, float]
    outages: dict[str, dict[str, int]]
    down_s: dict[str, dict[str, float]]
    up_run_start: float | None  # where the up run reaching the analysis's end began
    scores: list[RuleScore]


def window_of(analysis: Analysis, scores: list[RuleScore], at: float) -> Window:
    end = analysis.window_end or at
    observed: dict[str, float] = {}
    missing: dict[str, float] = {}
    outages: dict[str, dict[str, int]] = {}
    down: dict[str, dict[str, float]] = {}
    for name, seconds in WINDOWS.items():
        lower = end - seconds
        observed[name] = missing[name] = 0.0
        down[name] = dict.fromkeys(DOWN_CAUSES, 0.0)
        outages[name] = dict.fromkeys(DOWN_CAUSES, 0)
        for seg in analysis.segments:
            part = max(0.0, seg.end - max(seg.start, lower))
            if seg.state == UP:
                observed[name] += part
            elif seg.state in DOWN_CAUSES:
                observed[name] += part
                down[name][seg.state] += part
            else:
                missing[name] += part
        for outage in analysis.outages:
            if outage.end > lower:
                outages[name][outage.state] += 1
    current = analysis.current_up_s()
    up_run_start = end - current if current > 0 else None
    return Window(at, observed, missing, outages, down, up_run_start, scores)


@dataclass
class MetricsState:
    """What the families are made of, kept up to date one sample at a time."""

    started_at: float
    interval_s: float
    samples: int = 0
    last: Sample | None = None
    last_state: str | None = None
    up_since: float | None = None
    window: Window | None = None
    faults: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EFFECTS, 0))
    throttled: dict[tuple[str, str], float] = field(default_factory=dict)
    ecc: dict[tuple[str, str], int] = field(default_factory=dict)
    cgnat: str | None = None
    address_changes: int = 0
    address: str | None = None
    ports: dict[tuple[str, str], str] = field(default_factory=dict)
    ports_checked_at: float | None = None

    def add_events(self, events: list[tuple[str, dict[str, Any]]], at: float) -> None:
        for kind, detail in events:
            if kind == "xid":
                effect = str(detail.get("effect"))
                if effect in self.faults:
                    self.faults[effect] += 1
            elif kind == "ecc" and isinstance(detail.get("gpu"), int) and detail.get("available") is not False:
                for kind_ in ECC_TYPES:
                    key = (str(detail["gpu"]), kind_)
                    self.ecc[key] = self.ecc.get(key, 0) + int(_num(detail.get(f"{kind_}_new")) or 0)
            elif kind == "cgnat" and str(detail.get("verdict")) in CGNAT_VERDICTS:
                self.cgnat = str(detail["verdict"])
            elif kind == "public_address":
                if detail.get("previous") is not None:
                    self.address_changes += 1
                self.address = str(detail.get("address"))
            elif kind == "inbound":
                self.ports_checked_at = at
                self.ports = {(str(p.get("port")), str(p.get("proto"))): str(p.get("result"))
                              for p in detail.get("ports") or [] if isinstance(p, dict)}

    def add_sample(self, s: Sample) -> str:
        """Take the sample in; returns its state (up, network or driver)."""
        state, _ = sample_state(s)
        if state == UP and self.last_state != UP:
            self.up_since = s.t
        self.last, self.last_state = s, state
        self.samples += 1
        for g in s.detail.get("gpus") or []:
            if not isinstance(g, dict) or not isinstance(g.get("i"), int):
                continue
            for reason, key in (("thermal", "th"), ("power", "pw")):
                seconds = _num(g.get(key))
                if seconds is not None and _num(g.get("span")) is not None:
                    self.throttled[(str(g["i"]), reason)] = self.throttled.get((str(g["i"]), reason), 0.0) + seconds
        return state

    def set_window(self, window: Window) -> None:
        self.window = window
        if self.last_state == UP and window.up_run_start is not None:
            self.up_since = min(self.up_since or window.up_run_start, window.up_run_start)


def _ratio_threshold(score: RuleScore) -> float | None:
    rule = score.rule
    return _num(rule.get("threshold")) if "threshold" in rule else _num(rule.get("verification"))


def _projected(score: RuleScore) -> float | None:
    at_rate = _num(score.numbers.get("at_rate_pct"))
    if at_rate is not None:
        return at_rate / 100.0
    return _num(score.numbers.get("uptime"))


def families(state: MetricsState, *, addresses: bool = False) -> list[Family]:
    """Every family with its samples now; one without samples is left out."""
    out = {m.name: Family(m) for m in CATALOG}

    def add(name: str, value: float | None, **labels: str) -> None:
        if value is not None:
            out[f"hostcheck_watch_{name}"].add(value, **labels)

    last = state.last
    if last is not None:
        add("up", 1.0 if state.last_state == UP else 0.0)
        for cause in LIVE_STATES:
            add("state", 1.0 if state.last_state == cause else 0.0, cause=cause)
        add("last_sample_timestamp_seconds", last.t)
        add("current_up_seconds", max(0.0, last.t + last.interval_s - state.up_since)
            if state.last_state == UP and state.up_since is not None else 0.0)
        for g in last.detail.get("gpus") or []:
            if isinstance(g, dict) and isinstance(g.get("i"), int):
                add("gpu_temperature_celsius", _num(g.get("temp")), gpu=str(g["i"]))
                add("gpu_power_watts", _num(g.get("w")), gpu=str(g["i"]))
    add("sample_interval_seconds", state.interval_s)
    add("recorder_start_timestamp_seconds", state.started_at)
    add("samples_total", float(state.samples))
    window = state.window
    if window is not None:
        add("analysis_timestamp_seconds", window.at)
        for name in WINDOWS:
            observed = window.observed_s[name]
            add("window_observed_seconds", observed, window=name)
            add("window_not_recorded_seconds", window.not_recorded_s[name], window=name)
            down = sum(window.down_s[name].values())
            add("window_uptime_ratio", (observed - down) / observed if observed > 0 else None, window=name)
            for cause in DOWN_CAUSES:
                add("window_outages", float(window.outages[name][cause]), window=name, cause=cause)
                add("window_down_seconds", window.down_s[name][cause], window=name, cause=cause)
        for score in window.scores:
            add("platform_score_ratio", score.score, rule=score.rule_id)
            add("platform_projected_ratio", _projected(score), rule=score.rule_id)
            add("platform_threshold_ratio", _ratio_threshold(score), rule=score.rule_id)
            for verdict in VERDICTS:
                add("platform_verdict", 1.0 if score.verdict == verdict else 0.0, rule=score.rule_id, verdict=verdict)
    if last is not None:
        # The recorder's own judgement, which knows this boot's Xid lines from earlier ones.
        add("gpu_out_of_service", 1.0 if str(last.detail.get("nvml", "")).startswith(OUT_OF_SERVICE) else 0.0)
    for effect in EFFECTS:
        add("gpu_faults_total", float(state.faults[effect]), effect=effect)
    for (gpu, reason), seconds in sorted(state.throttled.items()):
        add("gpu_throttled_seconds_total", seconds, gpu=gpu, reason=reason)
    for (gpu, kind), count in sorted(state.ecc.items()):
        add("gpu_ecc_errors_total", float(count), gpu=gpu, type=kind)
    if state.cgnat is not None:
        for verdict in CGNAT_VERDICTS:
            add("cgnat", 1.0 if state.cgnat == verdict else 0.0, verdict=verdict)
    add("public_address_changes_total", float(state.address_changes))
    if addresses and state.address is not None:
        add("public_address_info", 1.0, address=state.address)
    for (port, proto), result in sorted(state.ports.items()):
        reached = 1.0 if result == InboundResult.REACHABLE else 0.0 if result == InboundResult.UNREACHABLE else None
        add("forwarded_port_reachable", reached, port=port, proto=proto)
    add("forwarded_ports_check_timestamp_seconds", state.ports_checked_at)
    return [f for f in out.values() if f.samples]
