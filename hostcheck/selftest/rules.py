"""The self-test's thresholds and their sources, from rules.yaml (data, checked on load)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hostcheck import yaml_loader
from hostcheck.models import SourceEntry, SourceRef, SourceStatus

RULES_PATH = Path(__file__).with_name("rules.yaml")


@dataclass(frozen=True)
class Rule:
    name: str
    value: float
    unit: str
    source_key: str
    source: SourceEntry
    own_choice: str

    @property
    def ref(self) -> SourceRef:
        return SourceRef(title=self.source.title, url=str(self.source.url), checked=str(self.source.checked))

    @property
    def draft(self) -> bool:
        """Rests on a page the platform has not published: a risk, never a blocker."""
        return self.source.status != SourceStatus.PUBLISHED


@cache
def rules() -> dict[str, Rule]:
    data = yaml_loader.safe_load(RULES_PATH.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != 1:
        raise ValueError(f"{RULES_PATH}: not a format-1 rules file")
    sources = {key: SourceEntry.model_validate(entry) for key, entry in data["sources"].items()}
    found: dict[str, Rule] = {}
    for name, row in data["thresholds"].items():
        if row.get("source") not in sources:
            raise ValueError(f"{RULES_PATH}: {name} cites {row.get('source')!r}, not a key of sources")
        found[name] = Rule(name, float(row["value"]), str(row["unit"]), row["source"], sources[row["source"]],
                           " ".join(str(row.get("own_choice", "")).split()))
    return found


def value(name: str) -> float:
    return rules()[name].value
