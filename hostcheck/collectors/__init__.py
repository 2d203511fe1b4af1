"""Collectors: the only code that touches the system.

Each collector module exposes ``SECTION`` (top-level facts key it fills), ``TIMEOUT``
(seconds), an optional ``NEEDS_NETWORK = True`` and ``collect(ctx) -> dict``. A network collector also names the
keys it fills (``OFFLINE_KEYS``) so that ``--offline`` can mark each of them unknown without
running it. Several collectors may fill the same section: their dicts are merged at the top level.
A value a collector cannot determine is an ``Unknown(reason)``, never ``None``-as-no.
"""

from __future__ import annotations

import importlib
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any

from hostcheck import __version__
from hostcheck.facts import FACTS_FORMAT, Unknown
from hostcheck.netprobe.port_range import AGENT_RANGE_FILE


@cache
def collector_modules() -> tuple[str, ...]:
    """Every audit collector: each module of this package that assigns ``SECTION`` at its top
    level, by name; a new collector is a new module, listed nowhere else. Found by reading the
    sources, not importing them, so that a collector whose module cannot load still leaves its
    trace (:func:`_broken`). Helpers (``_run``, ``docker_config``) and the measurements that
    write or take time (``power_draw``, ``disk_bw``) declare no section: the audit never runs
    them."""
    import pkgutil
    import re
    from importlib import resources

    here = resources.files(__name__)
    found = [info.name for info in pkgutil.iter_modules(__path__) if not info.ispkg and not info.name.startswith("_")]
    declares = re.compile(r"^SECTION\b", re.M)
    return tuple(f"{__name__}.{name}" for name in sorted(found)
                 if declares.search((here / f"{name}.py").read_text(encoding="utf-8")))


DEFAULT_BUDGET_S = 10.0


@dataclass
class CollectContext:
    """What collectors may know about the run (never global state)."""

    offline: bool = False
    budget_s: float = DEFAULT_BUDGET_S
    stun_servers: list[str] = field(default_factory=list)
    probe_url: str | None = None
    probe_token: str | None = None
    probe_fingerprint: str | None = None
    probe_ports: list[int] = field(default_factory=list)
    # The owner's --port-range FIRST-LAST, and where the agent keeps its own range.
    port_range: str | None = None
    agent_range_file: str = AGENT_RANGE_FILE
    # Extra networks to treat as "global" (the NAT lab's documentation ranges).
    public_ranges: list[str] = field(default_factory=list)
    # A `hostcheck watch` database to judge uptime from (None: the default path).
    watch_db: str | None = None
    # Start of the window the agents collector summarises sudo's journal over (epoch seconds;
    # None: the last 7 days).
    agent_since: float | None = None
    deadline: float = 0.0

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


ProgressFn = Callable[[str, str], None]
"""Called as progress(collector_name, state) with state 'start' | 'done' | 'timeout' | 'error'."""


@dataclass(frozen=True)
class CollectorSpec:
    name: str
    section: str
    timeout: float
    needs_network: bool
    collect: Callable[[CollectContext], dict[str, Any] | Unknown]
    offline_keys: tuple[str, ...] = ()


def load_collectors(modules: tuple[str, ...] | None = None) -> list[CollectorSpec]:
    """The collectors of ``modules`` (default: every one, :func:`collector_modules`)."""
    specs = []
    for modname in collector_modules() if modules is None else modules:
        try:
            mod = importlib.import_module(modname)
        except ImportError as exc:
            specs.append(_broken(modname, exc))
            continue
        specs.append(
            CollectorSpec(
                name=modname.rsplit(".", 1)[-1],
                section=mod.SECTION,
                timeout=float(mod.TIMEOUT),
                needs_network=bool(getattr(mod, "NEEDS_NETWORK", False)),
                collect=mod.collect,
                offline_keys=tuple(getattr(mod, "OFFLINE_KEYS", ())),
            )
        )
    return specs


def _broken(modname: str, exc: ImportError) -> CollectorSpec:
    """A collector whose module cannot load still leaves a trace in the facts: its own key,
    Unknown with the reason (the facts it would have filled stay absent, hence unknown)."""
    name = modname.rsplit(".", 1)[-1]
    reason = f"collector {modname} could not load: {exc}"
    return CollectorSpec(name, name, 1.0, False, lambda _ctx: Unknown(reason))


def _merge(facts: dict[str, Any], section: str, part: Any) -> None:
    current = facts.get(section)
    if isinstance(part, dict) and isinstance(current, dict):
        current.update(part)
    elif current is None or isinstance(current, Unknown):
        facts[section] = part
    # else: keep what is there; an Unknown never overwrites known data of a sibling collector


def collect_facts(
    ctx: CollectContext,
    progress: ProgressFn | None = None,
    specs: list[CollectorSpec] | None = None,
) -> dict[str, Any]:
    """Run every collector concurrently, each within its own timeout and the overall budget."""
    started = time.monotonic()
    ctx.deadline = started + ctx.budget_s
    specs = load_collectors() if specs is None else specs
    facts: dict[str, Any] = {}
    timings: dict[str, float] = {}
    notify = progress or (lambda _name, _state: None)

    runnable = []
    for spec in specs:
        if spec.needs_network and ctx.offline:
            _merge(facts, spec.section, _offline_part(spec))
            timings[spec.name] = 0.0
            notify(spec.name, "skipped")
        else:
            runnable.append(spec)

    futures: dict[Future[Any], CollectorSpec] = {}
    begun: dict[str, float] = {}
    for spec in runnable:
        notify(spec.name, "start")
        begun[spec.name] = time.monotonic()
        futures[_start(spec, ctx)] = spec
    pending = set(futures)
    while pending:
        now = time.monotonic()
        # Each collector's own limit, capped by the overall budget.
        limits = {f: min(begun[futures[f].name] + futures[f].timeout, ctx.deadline) for f in pending}
        wait_for = max(0.0, min(limits.values()) - now)
        done, pending = wait(pending, timeout=wait_for, return_when=FIRST_COMPLETED)
        for fut in done:
            spec = futures[fut]
            timings[spec.name] = round(time.monotonic() - begun[spec.name], 3)
            try:
                part = fut.result()
                notify(spec.name, "done")
            except Exception as exc:  # a crashing collector is an unknown, never a pass
                part = Unknown(f"collector '{spec.name}' failed: {type(exc).__name__}: {exc}")
                notify(spec.name, "error")
            _merge(facts, spec.section, part)
        now = time.monotonic()
        for fut in [f for f in pending if limits[f] <= now]:
            spec = futures[fut]
            pending.discard(fut)
            overall = ctx.deadline <= now
            why = (
                f"overall audit budget of {ctx.budget_s:g}s ran out"
                if overall
                else f"collector '{spec.name}' timed out after {spec.timeout:g}s"
            )
            timings[spec.name] = round(now - begun[spec.name], 3)
            _merge(facts, spec.section, Unknown(why))
            notify(spec.name, "timeout")

    facts["meta"] = {
        "facts_format": FACTS_FORMAT,
        "hostcheck_version": __version__,
        "hostname": socket.gethostname(),
        "collected_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "offline": ctx.offline,
        "duration_s": round(time.monotonic() - started, 3),
        "collector_timings_s": timings,
        "source": "live",
    }
    return facts


def _start(spec: CollectorSpec, ctx: CollectContext) -> Future[Any]:
    """Run one collector in a daemon thread: a stuck probe is abandoned when its time is up and
    cannot keep the process alive at exit (a ThreadPoolExecutor's workers are joined at exit)."""
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            result = spec.collect(ctx)
        except BaseException as exc:  # handed to the waiting side as the collector's error
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=run, name=f"collector-{spec.name}", daemon=True).start()
    return future


def _offline_part(spec: CollectorSpec) -> Any:
    reason = Unknown(f"not probed: --offline (collector '{spec.name}' needs the network)")
    return {key: reason for key in spec.offline_keys} if spec.offline_keys else reason
