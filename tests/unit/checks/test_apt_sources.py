"""PKG-1030: automatic security upgrades need a security suite among the APT sources."""

from __future__ import annotations

from typing import Any

from hostcheck.checks import load_registry
from hostcheck.collectors import apt_sources
from hostcheck.facts import Unknown
from hostcheck.judge import run_check

REGISTRY = load_registry()
ON = {"installed": True, "enabled": True}


def judge(unattended: Any, sources: Any) -> Any:
    return run_check(REGISTRY["PKG-1030"], {"packages": {"unattended_upgrades": unattended, "apt_sources": sources}}, None)


def facts_from(one_line: str = "", deb822: str = "") -> dict[str, Any]:
    found = [s for s in apt_sources.parse_one_line(one_line) + apt_sources.parse_deb822(deb822) if s["type"] == "deb"]
    return {"sources": found, "security": [s for s in found if apt_sources.is_security(s)]}


def test_debian_deb822_with_security_passes() -> None:
    sources = facts_from(deb822="Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n"
                                "Components: main\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\n"
                                "Suites: bookworm-security\nComponents: main\n")
    outcome = judge(ON, sources)
    assert outcome.status == "pass" and "bookworm-security" in outcome.detail


def test_ubuntu_one_line_with_options_passes() -> None:
    sources = facts_from("deb [arch=amd64 signed-by=/x.gpg] http://archive.ubuntu.com/ubuntu noble main\n"
                         "deb http://security.ubuntu.com/ubuntu noble-security main # fixes\n")
    assert judge(ON, sources).status == "pass"


def test_no_security_suite_fails_when_updates_are_on() -> None:
    sources = facts_from("deb http://deb.debian.org/debian bookworm main\n# deb http://deb.debian.org/debian-security "
                         "bookworm-security main\n",
                         "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nEnabled: no\n")
    outcome = judge(ON, sources)
    assert outcome.status == "fail" and outcome.measured == "absent"


def test_updates_off_is_skipped_and_unknown_sources_are_unknown() -> None:
    assert judge({"installed": False, "enabled": False}, facts_from()).status == "skipped"
    assert judge(ON, Unknown("no APT sources file could be read")).status == "unknown"
