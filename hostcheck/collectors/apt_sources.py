"""Where APT takes packages from: the configured sources (one-line and deb822 files), and
whether any of them is a security origin. Read from the files, not from `apt-cache policy`,
which only lists sources whose indexes have been downloaded."""

from __future__ import annotations

import glob
from typing import Any

from hostcheck.collectors._run import read_text
from hostcheck.facts import Unknown

SECTION = "packages"
TIMEOUT = 2.0

SOURCES_LIST = "/etc/apt/sources.list"
SOURCES_DIR = "/etc/apt/sources.list.d"
SECURITY_HOSTS = ("security.debian.org", "security.ubuntu.com", "debian-security")


def parse_one_line(text: str) -> list[dict[str, str]]:
    sources = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        words = line.split()
        if len(words) < 3 or words[0] not in ("deb", "deb-src"):
            continue
        rest = words[1:]
        if rest[0].startswith("["):
            while rest and not rest[0].endswith("]"):
                rest = rest[1:]
            rest = rest[1:]
        if len(rest) >= 2:
            sources.append({"type": words[0], "uri": rest[0], "suite": rest[1]})
    return sources


def parse_deb822(text: str) -> list[dict[str, str]]:
    sources = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        for kind in fields.get("types", "").split():
            for uri in fields.get("uris", "").split():
                for suite in fields.get("suites", "").split():
                    sources.append({"type": kind, "uri": uri, "suite": suite})
    return sources


def is_security(source: dict[str, str]) -> bool:
    suite = source.get("suite", "")
    return (suite.endswith("-security") or suite.endswith("/updates")
            or any(h in source.get("uri", "") for h in SECURITY_HOSTS))


def collect(ctx: Any) -> dict[str, Any]:
    files = [SOURCES_LIST] + sorted(glob.glob(f"{SOURCES_DIR}/*.list")) + sorted(glob.glob(f"{SOURCES_DIR}/*.sources"))
    sources: list[dict[str, str]] = []
    read_any = False
    for path in files:
        text = read_text(path)
        if isinstance(text, Unknown):
            continue
        read_any = True
        sources += parse_deb822(text) if path.endswith(".sources") else parse_one_line(text)
    if not read_any:
        return {"apt_sources": Unknown("no APT sources file could be read")}
    binary = [s for s in sources if s["type"] == "deb"]
    return {"apt_sources": {"sources": binary, "security": [s for s in binary if is_security(s)]}}
