"""--redact: remove what identifies the machine or its people, by what each value IS.

Redaction works on the facts, by kind. Each fact path declares its kind in
:mod:`hostcheck.fact_paths` (``meta.hostname=host``, ``isolation.human_accounts.*.name=user``,
``network.path.local_ipv4=addr`` ...; see :data:`KINDS`). A user name is replaced where the facts
say it is a user name (account fields, the name after ``/home/``, the user part of ``user@host``
and of URL credentials), never as a word of unrelated text; the host's name is replaced by its
labels (the full name, the short name, the domain) in free text; values the checks compare
(``system.os_id``, GPU model names, verdict words) lose only what is shaped like an identifier
and dotted names, never a learned single word, so a user (or a host) called ``ubuntu`` leaves
``os_id: ubuntu`` alone.

The redacted report is then judged again from the redacted facts (see :func:`redacted_report`), so
policy text (titles, why, fix) is never touched and every measured value comes from redacted
facts. Addresses are replaced by addresses of the same scope, so the checks that classify them
(CGNAT, double NAT, IPv4/IPv6) judge the redacted facts as they judged the originals:

* private, shared (100.64/10), link-local and unique-local addresses get a keyed,
  prefix-preserving permutation of the bits after their block (10.1.2.3 stays in 10/8, two
  addresses of one /24 stay in one /24, a network keeps its members);
* global addresses become documentation addresses (192.0.2.0/24, 198.51.100.0/24,
  203.0.113.0/24, 2001:db8::/32), counted in order, and ``network.path.public_ranges`` names
  those blocks so that they still count as public; other reserved addresses become 240.0.0.N
  or 100::N;
* loopback, unspecified, multicast and broadcast addresses identify nobody and stay.

Everything else is a placeholder, one per value for the whole report (``[user-1]``,
``[host-2]``, ``[mac-1]``, ``enx[mac-1]`` for an interface named after its MAC), so the same
value reads the same everywhere. URLs lose their credentials and their query string.
"""

from __future__ import annotations

from typing import Any

from hostcheck.facts import hostname
from hostcheck.models import Finding, Host, Policy, Report
from hostcheck.redact.kinds import kind_of
from hostcheck.redact.patterns import SUBSTITUTE_PUBLIC_RANGES, UNKNOWN_KEY
from hostcheck.redact.redactor import Redactor

__all__ = ["SUBSTITUTE_PUBLIC_RANGES", "Redactor", "kind_of", "outcomes", "redact", "redact_facts", "redacted_report"]


def redact_facts(facts: dict[str, Any], redactor: Redactor | None = None) -> dict[str, Any]:
    """JSON-ready facts with every identifying value replaced (see the module docstring)."""
    redactor = redactor or Redactor()
    redactor.learn(facts)
    redacted = redactor.redact(facts)
    assert isinstance(redacted, dict)
    network = redacted.get("network")
    path = network.get("path") if isinstance(network, dict) else None
    if isinstance(path, dict) and UNKNOWN_KEY not in path:
        # The blocks public addresses were replaced from count as public, as the originals did.
        path["public_ranges"] = [block for block in SUBSTITUTE_PUBLIC_RANGES if block in redactor.substitute_blocks]
    return redacted


def redact(report: Report, redactor: Redactor | None = None) -> Report:
    """A finished report with its facts redacted and the host name replaced. Verdicts and
    findings stay as they are: :func:`redacted_report` judges the redacted facts afresh instead
    (what ``--redact`` prints)."""
    redactor = redactor or Redactor()
    facts = redact_facts(report.facts, redactor)
    # What a finding measured came from the facts: what is shaped like an identifier, and the
    # names learned from the facts, go from it too (the fleet view shows verdicts, not these).
    policies = [p.model_copy(update={"findings": [_scrub_finding(f, redactor) for f in p.findings]})
                for p in report.policies]
    return report.model_copy(update={"facts": facts, "policies": policies, "redacted": True,
                                     "host": Host(hostname=hostname(facts))})


def _scrub_finding(finding: Finding, redactor: Redactor) -> Finding:
    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return redactor.scrub(value)
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    return finding.model_copy(update={"measured": scrub(finding.measured), "detail": redactor.scrub(finding.detail)})


def outcomes(report: Report) -> dict[str, Any]:
    """What re-judging must preserve: each policy's verdict, score and each finding's status."""
    return {p.id: (p.verdict, p.score, sorted((f.id, f.status) for f in p.findings)) for p in report.policies}


def redacted_report(facts: dict[str, Any], policies: list[Policy], original: Report,
                    servers: list[str] | None = None) -> tuple[Report, list[str]]:
    """The report of the redacted ``facts`` (judged afresh, so policy text is untouched and every
    measured value comes from redacted facts), and the policies whose outcome redaction changed
    (none: a test holds every snapshot to it; named so that the CLI can say so if it happens)."""
    from datetime import datetime

    from hostcheck.facts import from_jsonable, to_jsonable
    from hostcheck.report import build_report

    redactor = Redactor()
    for server in servers or []:  # --probe URL, --stun-server HOST[:PORT]: named in error texts too
        redactor.learn_server(server)
    redacted_facts = redact_facts(to_jsonable(facts), redactor)
    made = datetime.fromisoformat(original.generated_at)  # the same report, the same day
    report = build_report(from_jsonable(redacted_facts), policies, made).model_copy(update={"redacted": True})
    before, after = outcomes(original), outcomes(report)
    changed = sorted(pid for pid in before if before[pid] != after.get(pid))
    return report, changed
