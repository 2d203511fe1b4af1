"""A platform's own self-test, check by check, against the hostcheck checks that predict it.

Vast's `vastai self-test machine` reports each preflight gate and each runtime stage by an id;
``policies/selftest/<platform>.yaml`` maps every one of them to the hostcheck check ids that
judge the same thing before the self-test runs, or says why none can. It is data, with its
sources pinned like a policy's, so the documentation's table and any report read one map.
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hostcheck.checks import load_registry
from hostcheck.errors import PolicyError
from hostcheck.models import CheckId, SourceEntry, Text, absent
from hostcheck.yaml_loader import safe_load


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stage(StrEnum):
    """Where in the self-test the check runs: before renting (the offer's fields) or in the test instance."""

    PREFLIGHT = "preflight"
    RUNTIME = "runtime"


class NotPredicted(StrEnum):
    """Why no hostcheck check predicts a self-test check."""

    GPU_LOAD = "gpu-load"
    VAST = "vast"
    RUN = "run"
    CONTAINER = "container"
    ADVISORY = "advisory"


NOT_PREDICTED_TEXT = {
    NotPredicted.GPU_LOAD: "not predicted: needs the GPU under load (only the self-test runs it)",
    NotPredicted.VAST: "not predicted: the state of Vast's side (the offer, its API)",
    NotPredicted.RUN: "not predicted: how that self-test run itself went",
    NotPredicted.CONTAINER: "not predicted: starting the test container (Docker and the NVIDIA runtime as "
                            "Vast's installer sets them up)",
    NotPredicted.ADVISORY: "not predicted: advice only, never a failure",
}
"""What the table says in place of a check id, by reason."""


class SelftestCheck(_Strict):
    """One check of the platform's self-test and what predicts it."""

    id: Text = Field(description="the self-test's own id (a preflight check's id, a runtime failure code)")
    stage: Stage
    title: Text
    source: str = Field(description="a key of 'sources'")
    predicted_by: list[CheckId] = absent("hostcheck checks that judge the same thing")
    not_predicted: NotPredicted = absent("why no hostcheck check can")

    @model_validator(mode="after")
    def _one_answer(self) -> SelftestCheck:
        if (self.predicted_by is None) == (self.not_predicted is None):
            raise ValueError(f"{self.id}: give either 'predicted_by' or 'not_predicted'")
        if self.predicted_by is not None and not self.predicted_by:
            raise ValueError(f"{self.id}: 'predicted_by' lists at least one check id")
        return self

    @property
    def answer(self) -> str:
        """The hostcheck ids that predict it, or why none does."""
        if self.predicted_by:
            return ", ".join(self.predicted_by)
        return NOT_PREDICTED_TEXT[self.not_predicted]


class SelftestMap(_Strict):
    """``policies/selftest/<platform>.yaml``."""

    model_config = ConfigDict(title="hostcheck self-test map, format 1")

    format: Literal[1]
    platform: Text
    command: Text = Field(description="the command that runs the platform's self-test")
    sources: dict[str, SourceEntry] = Field(min_length=1)
    checks: list[SelftestCheck] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self) -> SelftestMap:
        seen: set[str] = set()
        for row in self.checks:
            if row.source not in self.sources:
                raise ValueError(f"{row.id}: source {row.source!r} is not a key of 'sources'")
            if row.id in seen:
                raise ValueError(f"{row.id}: listed twice")
            seen.add(row.id)
        return self


def parse_selftest_map(text: str, path: str) -> SelftestMap:
    """The map in ``text``; :class:`PolicyError` naming the file, the field and why."""
    try:
        data: Any = safe_load(text)
        doc = SelftestMap.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "map"
        raise PolicyError(f"{path}: {where}: {first['msg']}") from None
    except Exception as exc:  # a YAML syntax error
        raise PolicyError(f"{path}: not readable as YAML ({exc})") from None
    registry = load_registry()
    for row in doc.checks:
        unknown = [check for check in row.predicted_by or [] if check not in registry]
        if unknown:
            raise PolicyError(f"{path}: {row.id}: unknown check id {', '.join(unknown)}")
    return doc


@lru_cache(maxsize=4)
def load_selftest_map(platform: str = "vast") -> SelftestMap:
    """The shipped map of ``platform``'s self-test."""
    entry = resources.files("hostcheck") / "policies" / "selftest" / f"{platform}.yaml"
    if not entry.is_file():
        raise PolicyError(f"no self-test map for {platform!r}")
    return parse_selftest_map(entry.read_text(encoding="utf-8"), f"policies/selftest/{platform}.yaml")
