"""Is a GPU a laptop part? Judged from its name and the DMI chassis type (pure; GPU-1060)."""

from __future__ import annotations

from hostcheck.facts import Unknown

LAPTOP_MARKERS = ("laptop", "max-q", "mobile")

Chassis = tuple[str | Unknown, int | Unknown]


def laptop_verdict(name: str | Unknown, chassis: Chassis) -> tuple[bool | Unknown, str]:
    kind, code = chassis
    evidence = []
    if isinstance(name, str):
        lowered = name.lower()
        for marker in LAPTOP_MARKERS:
            at = lowered.find(marker)
            if at >= 0:
                evidence.append(f"name contains '{name[at:at + len(marker)]}'")
                break
    if kind == "laptop":
        evidence.append(f"DMI chassis type {code} (laptop)")
    if evidence:
        return True, "; ".join(evidence)
    named = "GPU name has no laptop marker" if isinstance(name, str) else "GPU name unknown"
    # Pre-Ampere mobile GPUs often carry no marker in their name, so only the chassis can say no.
    if isinstance(kind, Unknown):
        text = f"{named}, but the chassis type is unknown ({kind.reason})"
        return Unknown(text), text
    return False, f"{named}; DMI chassis type {code} ({kind})"
