"""The check registry: stable ids, metadata, families, and the outcome a check returns.

A check is a pure function ``(facts, threshold) -> Outcome``. It never touches the system.
Its id (family prefix + number, numbered in steps of 10) is stable across releases: policies,
reports and ``hostcheck explain`` refer to it. A family is declared with :func:`family` by the
check module that holds its checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup
from hostcheck.models import CHECK_ID_SHAPE, Operator, Status, ThresholdKind
from hostcheck.wording import unit_for

ID_PATTERN = re.compile(CHECK_ID_SHAPE)


@dataclass(frozen=True)
class Outcome:
    status: Status  # never WARN: judging decides between fail and warn by severity
    measured: Any = None
    detail: str = ""


def passed(measured: Any, detail: str = "") -> Outcome:
    return Outcome(Status.PASS, measured, detail)


def failed(measured: Any, detail: str = "") -> Outcome:
    return Outcome(Status.FAIL, measured, detail)


def unknown(reason: str, measured: Any = None) -> Outcome:
    return Outcome(Status.UNKNOWN, measured, reason)


def skipped(reason: str, measured: Any = None) -> Outcome:
    return Outcome(Status.SKIPPED, measured, reason)


def pass_if(ok: bool, measured: Any = None, detail: str = "") -> Outcome:
    return Outcome(Status.PASS if ok else Status.FAIL, measured, detail)


OPERATORS: dict[Operator, Callable[[Any, Any], bool]] = {
    Operator.GE: lambda a, b: a >= b,
    Operator.GT: lambda a, b: a > b,
    Operator.LE: lambda a, b: a <= b,
    Operator.LT: lambda a, b: a < b,
    Operator.EQ: lambda a, b: a == b,
    Operator.NE: lambda a, b: a != b,
    Operator.IN: lambda a, b: a in b,
}


@dataclass(frozen=True)
class Comparison:
    """A measured value held against a threshold, by the operator the check declared in
    :func:`check`: the registry compares (:meth:`CheckMeta.outcome`), so the operator is
    written once."""

    measured: Any
    threshold: Any
    detail: str = ""


def compare(measured: Any, threshold: Any, detail: str = "") -> Comparison:
    """Pass/fail by the check's declared operator; the one place comparisons are spelled out."""
    return Comparison(measured, threshold, detail)


CheckResult = Outcome | Comparison
CheckFunc = Callable[[dict[str, Any], Any], CheckResult]
Registered = TypeVar("Registered", bound=CheckFunc)


@dataclass(frozen=True)
class CheckMeta:
    id: str
    title: str
    op: Operator
    unit: str
    threshold_kind: ThresholdKind
    why: str
    fix: str
    fix_role: str  # "role: variable" in this repo's Ansible profile that fixes it, or ""
    func: CheckFunc
    shown: Callable[[Any], str] | None = None
    """How the measured value reads after the title, where the bare value would not say what
    it is the value of ("SSH password login off: yes" reads as the opposite of the truth)."""
    precondition: str = ""
    """Set where failing says a platform cannot take this kind of machine at all (not a setting
    to fix): the reason the headline's "cannot apply" line gives; ``{threshold}`` is replaced by
    the requirement's threshold."""
    says_agent_has_root: bool = False
    """An owner-risk item saying the platform's agent holds root here: the headline and the
    owner-risk statement name it whatever the rating."""
    superseded_by: str = ""
    """The id of a check that says what this one says, and more: where both fail, only that one
    is named."""
    requirement: str = ""
    """What must hold, as a sentence that stays true whatever was measured ("password login
    must be off"); default: "required: TITLE". Every finding line is this, then what was found
    (:meth:`line`), so no title is ever followed by a value that contradicts it."""
    dedicated_only: bool = False
    """Its fix is for a machine dedicated to hosting (a separate machine, a fresh install)."""

    def line(self, measured: Any, threshold: Any = None, detail: str = "", *, judged: bool = True) -> str:
        """The finding's line: the requirement, then what was found ("— found ...") or why it
        could not be judged ("— not judged: ..."). The one phrasing every check's line uses."""
        need = self.requirement or f"required: {self.title}"
        bar = self.threshold_text(threshold)
        if bar:
            need += f" ({bar})"
        if not judged:
            return f"{need} — not judged: {detail or 'no reason given'}"
        found = "" if measured is None or isinstance(measured, dict) else self.says(measured)
        if found and isinstance(measured, (int, float)) and not isinstance(measured, bool) and self.unit \
                and self.shown is None:
            found = f"{found} {unit_for(measured, self.unit)}"
        if found and detail:
            found = f"{found} ({detail})"
        found = found or detail
        return f"{need} — found {found}" if found else need

    def threshold_text(self, threshold: Any) -> str:
        """The bar to clear, as the line states it ('>= 0.9 ratio'), or '' where the
        requirement says it already."""
        if threshold is None or (isinstance(threshold, str) and self.op == Operator.EQ):
            return ""  # a statement (e.g. why a platform is closed), not a bar to clear
        if isinstance(threshold, list):
            return f"one of {', '.join(map(str, threshold))}"
        numeric = isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
        unit = f" {unit_for(threshold, self.unit)}" if self.unit and numeric else ""
        return f"{self.op} {threshold}{unit}"

    def says(self, measured: Any) -> str:
        """The measured value as the report prints it: a statement true by itself."""
        if self.shown is not None:
            try:
                return self.shown(measured)
            except Exception:  # a value from a foreign report: shown as it is
                pass
        return str(measured)

    def outcome(self, result: CheckResult) -> Outcome:
        """The check's result as an outcome: a :class:`Comparison` judged by :attr:`op`."""
        if isinstance(result, Comparison):
            return pass_if(OPERATORS[self.op](result.measured, result.threshold), result.measured, result.detail)
        return result

    @property
    def prefix(self) -> str:
        """Its family's prefix, the part of its id before the number."""
        return prefix_of(self.id)

    @property
    def family(self) -> str:
        """Its family's title, as the report names it."""
        return FAMILIES[self.prefix].title


REGISTRY: dict[str, CheckMeta] = {}


@dataclass(frozen=True)
class Family:
    """A family of checks: the prefix of their ids and the reader's name for them."""

    prefix: str
    title: str
    order: int
    """Its place among the families: the shipped schemas' check id pattern lists the prefixes
    in this order."""


FAMILIES: dict[str, Family] = {}
"""Prefix -> family, as the check modules declare them (:func:`family`)."""


def family(prefix: str, title: str, *, order: int) -> Family:
    """Declare a family of checks (asserted unique and well-formed at import)."""
    declared = Family(prefix, title, order)
    if not ID_PATTERN.match(f"{prefix}-0000"):
        raise ValueError(f"family prefix {prefix!r} is not upper-case letters")
    if prefix in FAMILIES:
        raise ValueError(f"family {prefix} declared twice")
    taken = next((f.prefix for f in FAMILIES.values() if f.order == order), None)
    if taken:
        raise ValueError(f"family {prefix}: order {order} is {taken}'s already")
    FAMILIES[prefix] = declared
    return declared


def prefix_of(check_id: str) -> str:
    return check_id.split("-")[0]


def undeclared_families() -> list[str]:
    """What names a family no module declared: a check's id or its ``superseded_by``."""
    return [f"check id {ref}{'' if ref == meta.id else f' (superseded_by of {meta.id})'}: no check module "
            f"declares family {prefix_of(ref)!r}"
            for meta in REGISTRY.values() for ref in (meta.id, meta.superseded_by)
            if ref and prefix_of(ref) not in FAMILIES]


def check(
    check_id: str,
    *,
    title: str,
    op: str,
    unit: str = "",
    threshold: ThresholdKind | str = ThresholdKind.NONE,
    why: str,
    fix: str,
    fix_role: str = "",
    shown: Callable[[Any], str] | None = None,
    precondition: str = "",
    says_agent_has_root: bool = False,
    superseded_by: str = "",
    requirement: str = "",
    dedicated_only: bool = False,
) -> Callable[[Registered], Registered]:
    """Register a check under a stable id (asserted unique and well-formed at import)."""

    def register(func: Registered) -> Registered:
        if not ID_PATTERN.match(check_id):
            raise ValueError(f"check id {check_id!r} does not match {ID_PATTERN.pattern}")
        if check_id in REGISTRY:
            raise ValueError(f"check id {check_id} registered twice")
        if superseded_by and not ID_PATTERN.match(superseded_by):
            raise ValueError(f"{check_id}: superseded_by {superseded_by!r} does not match {ID_PATTERN.pattern}")
        REGISTRY[check_id] = CheckMeta(
            check_id, title, Operator(op), unit, ThresholdKind(threshold), why.strip(), fix.strip(), fix_role, func,
            shown, precondition=precondition, says_agent_has_root=says_agent_has_root, superseded_by=superseded_by,
            requirement=requirement, dedicated_only=dedicated_only,
        )
        return func

    return register


STATE_WORDS = frozenset({
    "yes", "no", "on", "off", "true", "false", "enabled", "disabled", "none", "present", "absent",
    "encrypted", "unencrypted", "set", "unset",
})
"""Words that say a state without naming what is in it: after a title they read as its answer."""
_BARE_STATE = re.compile(r"^(\S+)( on GPU [0-9, ]+)?$")


def is_bare_state(text: str) -> bool:
    """'off', 'yes', 'off on GPU 0': a state that does not name its subject."""
    match = _BARE_STATE.match(text.strip())
    return match is not None and match.group(1).lower() in STATE_WORDS


def state_of(subject: str) -> Callable[[Any], str]:
    """Name the subject of a bare state: 'off' -> 'Secure Boot off'; phrases stay as they are."""

    def show(value: Any) -> str:
        text = str(value)
        return f"{subject} {text}" if is_bare_state(text) else text

    return show


def setting(name: str) -> Callable[[Any], str]:
    """A configuration value as the setting and its value ('PasswordAuthentication yes');
    a phrase (no single value: 'no sshd installed') stays as it is."""

    def show(value: Any) -> str:
        text = str(value)
        return f"{name} {text}" if text and not any(c.isspace() for c in text) else text

    return show


def id_of(func: Callable[..., Any]) -> str:
    """The id a check function is registered under, for code that names a check (a fix pointer)
    without spelling its id a second time."""
    return next(meta.id for meta in REGISTRY.values() if meta.func is func)


def need(facts: dict[str, Any], path: str) -> Any:
    """The fact at ``path``, or raise :class:`Missing` so the check reports unknown."""
    value = lookup(facts, path)
    if isinstance(value, Unknown):
        raise Missing(path, value.reason)
    return value


KERNEL_NAME = "system.os_kernel_name"


def is_macos(facts: dict[str, Any]) -> bool:
    """The facts come from a Mac (a Darwin kernel); False when the kernel is not known."""
    return bool(lookup(facts, KERNEL_NAME) == "Darwin")


_GPU_DEVICES = "gpu.devices"


def listed_devices(facts: dict[str, Any]) -> Any:
    """The GPUs NVML lists, as collected: a list, or an :class:`Unknown` saying why not."""
    return lookup(facts, _GPU_DEVICES)


def known_devices(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPUs NVML lists; :class:`Missing` when they are not known."""
    devices = need(facts, _GPU_DEVICES)
    if not isinstance(devices, list):
        raise no_devices("not a list")
    return devices


def no_devices(reason: str) -> Missing:
    """The check cannot judge the GPUs as a whole (``gpu.devices: REASON``)."""
    return Missing(_GPU_DEVICES, reason)


def display_adapters(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """Every PCI display adapter, of any vendor; :class:`Missing` when the bus could not be read."""
    adapters: list[dict[str, Any]] = need(facts, "gpu.display_adapters")
    return adapters


def device_field(device: dict[str, Any], key: str) -> Any:
    value = device.get(key, Unknown(f"GPU field '{key}' not collected"))
    if isinstance(value, Unknown) or value is None:
        reason = value.reason if isinstance(value, Unknown) else "not reported"
        raise Missing(f"gpu.devices[{device.get('index', '?')}].{key}", reason)
    return value


def version_tuple(text: str) -> tuple[int, ...]:
    """'550.54.15' -> (550, 54, 15); non-numeric parts stop the parse."""
    parts: list[int] = []
    for piece in str(text).split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
    if not parts:
        raise Missing("version", f"cannot read a version number from {text!r}")
    return tuple(parts)
