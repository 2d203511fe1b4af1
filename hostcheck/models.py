"""The one definition of hostcheck's vocabulary and documents: statuses, severities, verdicts,
operators, owner-risk levels, the shape of a check id, the policy file, the resolved policy, a
finding and the report.

Just over 500 lines for a reason: each shipped schema is generated from the words and the
models here together, so one module holds everything a schema says.

Every other module imports these enums instead of spelling the words again, and the JSON
Schemas shipped in ``hostcheck/schema/`` are generated from these models
(``python -m hostcheck.schema_gen``). The models are pydantic v2 models because pydantic gives
both halves for free: a JSON Schema from the same class the code validates with, and
validation errors that carry the path of the offending field, which the policy loader turns
into file, line and field.

The enums are ``StrEnum``: a member compares and serialises as its plain string, so the
reports and facts stay plain JSON.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError


class Status(StrEnum):
    """A finding's status. A check's own outcome never says ``warn``: judging turns a failed
    requirement that is not a blocker into ``warn``."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"
    SKIPPED = "skipped"
    ERROR = "error"


UNDECIDED = (Status.UNKNOWN, Status.ERROR)
"""Statuses that say the requirement could not be judged (never read as a pass)."""


class Severity(StrEnum):
    BLOCKER = "blocker"
    RISK = "risk"
    ADVICE = "advice"


class Level(StrEnum):
    """How much an owner-risk item exposes the owner when it fails."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Rating(StrEnum):
    """The owner-risk rating of a report: a level, or unknown when nothing failed but
    something could not be judged."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    UNKNOWN = "unknown"


class Verdict(StrEnum):
    FEASIBLE = "feasible"
    FEASIBLE_WITH_RISKS = "feasible with risks"
    NOT_FEASIBLE = "not feasible"
    UNDETERMINED = "undetermined"


FEASIBLE = (Verdict.FEASIBLE, Verdict.FEASIBLE_WITH_RISKS)
VERDICT_RANK: dict[Verdict, int] = {
    Verdict.FEASIBLE: 0, Verdict.FEASIBLE_WITH_RISKS: 1, Verdict.UNDETERMINED: 2, Verdict.NOT_FEASIBLE: 3}
"""Verdicts from best to worst: a rise in rank is a regression."""
OWNER_RISK_STOPS = (Rating.HIGH, Rating.UNKNOWN)
"""Owner-risk ratings that never let an audit exit 0 unless the user accepts them explicitly."""


class Operator(StrEnum):
    GE = ">="
    GT = ">"
    LE = "<="
    LT = "<"
    EQ = "=="
    NE = "!="
    IN = "in"


class PolicyKind(StrEnum):
    PLATFORM = "platform"
    HYGIENE = "hygiene"
    # Judged like any policy but rates the owner's exposure instead of giving a verdict.
    OWNER_RISK = "owner-risk"


class ThresholdKind(StrEnum):
    NUMBER = "number"
    STRING = "string"
    BOOL = "bool"
    LIST = "list"
    NONE = "none"


class NatBehaviour(StrEnum):
    """How a NAT maps, or filters, traffic (RFC 4787; the same words name both)."""

    ENDPOINT_INDEPENDENT = "endpoint-independent"
    ADDRESS_DEPENDENT = "address-dependent"
    ADDRESS_AND_PORT_DEPENDENT = "address-and-port-dependent"
    ENDPOINT_DEPENDENT = "endpoint-dependent"
    """The mapping changes with the destination address, and no RFC 5780 server was there to
    tell whether the port matters too (two plain servers' answers)."""
    NO_NAT = "no-nat"
    UNKNOWN = "unknown"


class NatVerdict(StrEnum):
    """Whether the host is behind carrier-grade NAT, or behind double NAT."""

    YES = "yes"
    LIKELY = "likely"
    NO = "no"
    UNKNOWN = "unknown"


class InboundResult(StrEnum):
    """What an outside probe of one forwarded port found."""

    REACHABLE = "reachable"
    """The probe's nonce reached this host's listener."""
    UNREACHABLE = "unreachable"
    UNVERIFIED = "unverified"
    """Not shown either way (no probe ran, or the port is in use here so the listener could not
    see the nonce)."""


class EgressVerdict(StrEnum):
    """What walking the recorded firewall finds for one probe packet from a container bridge
    (:mod:`hostcheck.firewall.egress`)."""

    REACHABLE = "reachable"
    BLOCKED = "blocked"
    UNDETERMINED = "undetermined"
    """A rule the walk does not model decides it."""


class UfwPortVerdict(StrEnum):
    """What ufw's user input chain does with a port the host profile opens
    (:mod:`hostcheck.firewall.opened`)."""

    ALLOWS = "allows"
    DROPS = "drops"
    UNDETERMINED = "undetermined"
    """A rule the walk does not model decides it."""


CHECK_ID_SHAPE = r"^[A-Z]+-[0-9]{4}$"
"""A check id without its family known: a prefix and a four-digit number. Which prefixes there
are is the check modules' to say (``hostcheck.checks.load_families``)."""
FAMILIES_CONTEXT = "check_families"
"""The validation context key under which a caller passes the family prefixes a check id may have."""


def check_id_pattern(prefixes: Iterable[str]) -> str:
    """The pattern of a check id in one of these families, prefixes in the order given."""
    return rf"^({'|'.join(prefixes)})-[0-9]{{4}}$"


def families_context(prefixes: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The validation context that holds check ids to these families (``model_validate(...,
    context=)``); without it an id is held to its shape only."""
    return {FAMILIES_CONTEXT: tuple(prefixes)}


def _check_id(value: str, info: ValidationInfo) -> str:
    # The families are the registry's, a layer above; the caller that knows them passes them in.
    prefixes = (info.context or {}).get(FAMILIES_CONTEXT)
    pattern = CHECK_ID_SHAPE if prefixes is None else check_id_pattern(prefixes)
    if not re.match(pattern, value):
        raise PydanticCustomError("string_pattern_mismatch", "String should match pattern '{pattern}'",
                                  {"pattern": pattern})
    return value


POLICY_FORMAT = 1
REPORT_VERSION: Literal[1] = 1

CheckId = Annotated[str, AfterValidator(_check_id),
                    WithJsonSchema({"pattern": CHECK_ID_SHAPE, "type": "string"})]
"""A check id; the shipped schemas name the families in its pattern (``hostcheck.schema_gen``)."""
Text = Annotated[str, StringConstraints(strict=True, min_length=1, pattern=r"\S")]
"""A non-empty string (blank is not a title, url or note)."""
ISO_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


def _iso_date(value: Any) -> dt.date:
    # YAML reads an unquoted 2026-11-29 as a date and a quoted one as a string; both are fine.
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise ValueError(f"must be a date YYYY-MM-DD, not {value!r}")


IsoDate = Annotated[dt.date, BeforeValidator(_iso_date)]


def _format_one(value: Any) -> Any:
    # Literal[1] alone takes True and 1.0 (both == 1); a format number is an integer.
    if type(value) is not int:
        shown = f"the boolean {value!r} (a boolean is not a number)" if isinstance(value, bool) else repr(value)
        raise ValueError(f"must be 1, not {shown}")
    return value


FormatOne = Annotated[Literal[1], BeforeValidator(_format_one)]
"""The format number 1, as an integer: not true, not 1.0, not "1"."""


# ------------------------------------------------------------------ the policy file (YAML)


def absent(description: str | None = None) -> Any:
    """An optional key that defaults to None yet may not be written as null (typed Any so
    the field keeps its non-optional type)."""
    return Field(None, description=description)


class _Strict(BaseModel):
    # Optional keys default to None without allowing an explicit null: `note: ~` is an error.
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceStatus(StrEnum):
    """What a cited page is: the platform's published word, a draft not yet published (an open
    pull request), a page the platform removed, or someone else's page. ``merged-pr`` is the
    platform's word too, read from where only a merged pull request's description could be
    read (its diff was not available): the url is the pull request and the quote a sentence
    of its description."""

    PUBLISHED = "published"
    MERGED_PR = "merged-pr"
    DRAFT = "draft"
    WITHDRAWN = "withdrawn"
    THIRD_PARTY = "third-party"


PINNED_URL_PATTERN = (
    r"^https://(github\.com/[\w.-]+/[\w.-]+/(blob|tree|commit)/[0-9a-f]{7,40}([/?#][^\s]*)?"
    r"|web\.archive\.org/web/[0-9]{8,14}/https?://[^\s]+)$"
)
"""A page pinned to what was read: a file, folder or commit of a GitHub repository at a commit
(7 to 40 hex digits, never a branch name), or an archived copy (web.archive.org/web/TIMESTAMP/URL)."""
PULL_URL_PATTERN = r"^https://github\.com/[\w.-]+/[\w.-]+/pull/[0-9]+$"
SOURCE_URL_PATTERN = PINNED_URL_PATTERN.removesuffix(")$") + r"|github\.com/[\w.-]+/[\w.-]+/pull/[0-9]+)$"
"""A pinned page, or (for a ``merged-pr`` source only, which the model checks) a pull request."""
SourceUrl = Annotated[str, StringConstraints(strict=True, pattern=SOURCE_URL_PATTERN)]
PullUrl = Annotated[str, StringConstraints(strict=True, pattern=PULL_URL_PATTERN)]
STATUS_SEVERITIES: dict[SourceStatus, tuple[Severity, ...]] = {
    SourceStatus.PUBLISHED: (Severity.BLOCKER, Severity.RISK, Severity.ADVICE),
    SourceStatus.MERGED_PR: (Severity.BLOCKER, Severity.RISK, Severity.ADVICE),
    SourceStatus.DRAFT: (Severity.RISK, Severity.ADVICE),
    SourceStatus.WITHDRAWN: (Severity.RISK, Severity.ADVICE),
    SourceStatus.THIRD_PARTY: (Severity.RISK, Severity.ADVICE),
}
"""The severities a requirement may have, by its source's status: only a published page makes a
blocker."""
STATUS_WORDS = {SourceStatus.DRAFT: "draft rule", SourceStatus.WITHDRAWN: "withdrawn rule"}
"""What a requirement's note says when it rests on a page that is not (or no longer) published."""


class SourceEntry(_Strict):
    """One page cited by a policy or a data file (platform economics, agents, reliability rules,
    the Xid catalogue): pinned to what was read, dated, with its status and the sentence it is
    cited for."""

    title: Text
    url: SourceUrl = Field(description="pinned to a commit (github.com/OWNER/REPO/blob|tree|commit/HEX...) "
                                       "or an archived copy (web.archive.org/web/TIMESTAMP/URL); for "
                                       "status merged-pr, the pull request (github.com/OWNER/REPO/pull/N)")
    checked: IsoDate = Field(description="the date the page was read")
    status: SourceStatus
    pull: PullUrl = absent("draft: the pull request that holds the page (required for a draft, only for one)")
    withdrawn: IsoDate = absent("withdrawn: the date the page was removed (required for withdrawn, only for it)")
    quote: Text = Field(description="the exact sentence (or table row) the source is cited for, as the page has it")
    paraphrase: bool = absent("true where the quote is the claim as it was recorded, not the page's own words "
                              "(the page could not be re-read); shown as a paraphrase wherever it is cited")
    note: Text = absent()

    @model_validator(mode="after")
    def _status_fields(self) -> SourceEntry:
        for field, status in (("pull", SourceStatus.DRAFT), ("withdrawn", SourceStatus.WITHDRAWN)):
            given = getattr(self, field) is not None
            if given != (self.status == status):
                if field == "pull" and given:
                    # A page read in a pull request (or at a commit only on its branch) is not
                    # what the platform publishes, whatever its own words say.
                    raise ValueError(f"'pull' is required for status draft and only for it: a page read in a "
                                     f"pull request is a draft, never {self.status}")
                raise ValueError(f"'{field}' is required for status {status} and only for it")
        # A pull request's page changes as it is edited: only a merged one, cited for its
        # description because nothing pinned could be read, may be the url.
        if (re.match(PULL_URL_PATTERN, self.url) is not None) != (self.status == SourceStatus.MERGED_PR):
            raise ValueError(f"the url is the pull request's address for status {SourceStatus.MERGED_PR} "
                             "and only for it (any other is pinned to a commit or an archived copy)")
        return self


class RequirementEntry(_Strict):
    """One requirement as written under ``requirements:``. Which of severity/level is
    required, the threshold's type and the source key are checked against the check registry
    and the policy's sources when the file is loaded."""

    check: CheckId
    severity: Severity = absent("platform and hygiene policies")
    level: Level = absent("owner-risk policies only")
    threshold: Any = absent("type given by the check (hostcheck explain ID)")
    source: str = absent("a key of 'sources' (required)")
    note: Text = absent()
    own_choice: Text = absent("where no source gives the threshold: hostcheck's reason for its own choice")


class PolicyDocument(_Strict):
    """A policy file, ``policies/*.yaml`` (shipped in the wheel as ``hostcheck/policies``)."""

    model_config = ConfigDict(title="hostcheck policy, format 1")

    format: FormatOne
    id: Text
    title: Text
    platform: Text
    kind: PolicyKind
    summary: Text
    follows: Text = absent("which page wins where the platform's pages disagree")
    sources: dict[str, SourceEntry] = Field(min_length=1)
    requirements: list[RequirementEntry] = Field(min_length=1)


# ------------------------------------------------------------------ the resolved policy


class Source(_Strict):
    key: str
    url: str
    title: str
    checked: str
    status: SourceStatus
    quote: str
    pull: str = ""
    withdrawn: str = ""
    note: str = ""
    paraphrase: bool = False

    @property
    def quote_text(self) -> str:
        """The quote as a reader sees it: a recorded paraphrase says it is not the page's words."""
        if self.paraphrase:
            return f'paraphrase, not the page\'s words: "{self.quote}"'
        return f'"{self.quote}"'

    @property
    def status_text(self) -> str:
        """The status as a reader needs it: a draft names its pull request, a withdrawn page its date."""
        if self.status == SourceStatus.DRAFT:
            number = str(self.pull).rstrip("/").rsplit("/", 1)[-1]
            return f"draft, not published (pull request #{number}, {self.pull})"
        if self.status == SourceStatus.WITHDRAWN:
            return f"withdrawn {self.withdrawn}"
        if self.status == SourceStatus.MERGED_PR:
            return "published (merged pull request; the quote is from its description)"
        return str(self.status)


class Requirement(_Strict):
    check: str
    severity: Severity
    threshold: Any
    source: Source
    note: str = ""
    level: Level | None = None  # owner-risk policies only
    own_choice: str = ""  # where hostcheck, not the source, chose the threshold: why


class Policy(_Strict):
    id: str
    title: str
    platform: str
    kind: PolicyKind
    summary: str
    follows: str
    requirements: tuple[Requirement, ...]
    path: str
    sources: tuple[Source, ...] = ()  # every source the file lists, cited by a requirement or not


# ------------------------------------------------------------------ the report (JSON)


class _Out(BaseModel):
    # Enum members while the report is a model; plain strings once it is dumped as JSON.
    model_config = ConfigDict(extra="forbid")


class SourceRef(_Out):
    title: str
    url: str
    checked: Annotated[str, StringConstraints(pattern=ISO_DATE)]


class Finding(_Out):
    id: CheckId
    title: str
    family: str
    severity: Severity
    status: Status
    measured: Any
    threshold: Any
    op: Operator
    unit: str
    detail: str
    why: Annotated[str, StringConstraints(min_length=1)]
    fix: Annotated[str, StringConstraints(min_length=1)]
    fix_role: str
    source: SourceRef
    note: str


class PolicyResult(_Out):
    id: str
    title: str
    platform: str
    kind: Annotated[PolicyKind, Field(json_schema_extra={"enum": [PolicyKind.PLATFORM, PolicyKind.HYGIENE]})]
    summary: str
    follows: str
    verdict: Verdict
    score: int = Field(ge=0, le=100)
    blockers: list[CheckId]
    risks: list[CheckId]
    unknowns: list[CheckId]
    applicable: bool
    precondition: str
    findings: list[Finding]


class OwnerRiskFinding(_Out):
    id: CheckId
    title: str
    note: str
    level: Level
    status: Status
    measured: Any
    detail: str
    fix: str
    fix_role: str
    source: SourceRef


class OwnerRisk(_Out):
    rating: Rating
    possibly: Level | None = Field(description="with rating unknown: the highest level among the items that could "
                                   "not be judged (what the rating could be); otherwise null")
    statement: str
    findings: list[OwnerRiskFinding]


class PlanStep(_Out):
    """One step of "What to do, in order": one fix, what it clears, what it unlocks."""

    action: str = Field(description="the fix: a role's variable to set, or what to do by hand")
    role: str = Field(description="the Ansible role in roles/ that makes the fix ('' for a manual action)")
    variable: str = Field(description="the role's variable (roles/ROLE/defaults/main.yml; '' for a manual action)")
    clears: list[CheckId] = Field(description="the findings this step clears")
    unlocks: list[str] = Field(description="the platforms feasible once this step (and those before it) is done")
    lowers: Level | None = Field(description="the highest owner-risk level among the items it clears")
    dedicated_only: bool = Field(description="for a machine dedicated to hosting only")


class UnknownGroup(_Out):
    """Checks that could not be judged for one cause, said once."""

    cause: str
    checks: list[CheckId]
    then: str = Field(description="what settles them ('' when nothing the owner can do)")


class Answer(_Out):
    """What the first screen says, built once beside the report so every format says the same."""

    headline: list[str] = Field(description="at most three sentences; the first names the first real obstacle")
    owner_risk: str = Field(description="the owner-risk rating with its top causes, one sentence")
    plan: list[PlanStep]
    plan_note: str = Field(description="why the plan holds what it holds (e.g. no hosting steps while owner risk is "
                           "high), or ''")
    later: list[PlanStep] = Field(default_factory=list, description="the steps held back while owner risk stops "
                                  "hosting, in the order to make them once it is lower")
    unknowns: list[UnknownGroup]


class Tool(_Out):
    name: Literal["hostcheck"]
    version: str


class Host(_Out):
    hostname: str | None


FACTS_PLACEHOLDER = {"type": "object", "x-hostcheck": "facts"}
FactsJson = Annotated[dict[str, Any], WithJsonSchema(FACTS_PLACEHOLDER)]
"""The facts tree, passed through as collected; the schema generator puts the schema derived
from :mod:`hostcheck.fact_paths` in this placeholder's place."""


class Report(_Out):
    model_config = ConfigDict(title="hostcheck audit report, version 1")

    report_version: Literal[1]
    redacted: bool = absent("present (true) when written with --redact")
    tool: Tool
    generated_at: Annotated[str, Field(json_schema_extra={"format": "date-time"})]
    rules_read: Annotated[str, StringConstraints(pattern=ISO_DATE)] = absent(
        "the oldest date on which a source of the policies judged was read: every rule behind the "
        "verdicts was read that day or later")
    host: Host
    headline: Annotated[str, StringConstraints(min_length=1)]
    answer: Answer
    policies: list[PolicyResult]
    owner_risk: OwnerRisk
    facts: FactsJson

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON data (what is written out); ``redacted`` only where it was set."""
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def from_json(cls, text: str, families: Iterable[str]) -> Report:
        """A written report read back, in JSON's own types: no coercion (true is not a score,
        "50" is not 50), and check ids only of these families; a ValidationError names the field."""
        return cls.model_validate_json(text, strict=True, context=families_context(families))
