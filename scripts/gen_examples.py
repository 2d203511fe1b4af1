"""Regenerate every output example in README.md and docs/*.md from the tool itself.

An example is marked in the Markdown like this (the command runs from the repository root, at
COLUMNS=80, its standard output pasted under a ``$ CMD`` line)::

    <!-- example: hostcheck audit --facts tests/snapshots/reference-laptop.json --offline -->
    ```text
    $ hostcheck audit --facts tests/snapshots/reference-laptop.json --offline
    ...what it prints...
    ```
    <!-- /example -->

    .venv/bin/python scripts/gen_examples.py          # rewrite the examples in place
    .venv/bin/python scripts/gen_examples.py --check  # exit 1 naming each example that differs

An HTML report is shown by its outline, its headings indented by level (the page itself is
opened by a browser in tests/unit/render/test_html_browser.py)::

    <!-- outline: hostcheck audit --facts tests/snapshots/reference-laptop.json --format html -->
    ...
    <!-- /outline -->

``scripts/regen`` runs this with the other generators.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = re.compile(r"(<!-- (?P<kind>example|outline): (?P<command>.+?) -->\n)(?P<body>.*?)(<!-- /(?P=kind) -->)",
                     re.DOTALL)
TIMEOUT_S = 120
COLUMNS = "80"
NOW_ENV = "HOSTCHECK_NOW"


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def run(command: str) -> str:
    """The command's standard output, run as a user would from the repository root."""
    argv = shlex.split(command)
    if not argv or argv[0] != "hostcheck":
        raise SystemExit(f"an example runs `hostcheck ...`, not {command!r}")
    env = {**os.environ, "COLUMNS": COLUMNS, "NO_COLOR": "1", NOW_ENV: release_day()}
    proc = subprocess.run([sys.executable, "-m", "hostcheck.cli", *argv[1:]], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=TIMEOUT_S, check=False)
    return proc.stdout


@cache
def release_day() -> str:
    """The examples are rendered on the day the shipped rules were last read, so they do not
    change with the clock (a report says its rules' age once they are 90 days old)."""
    sys.path.insert(0, str(REPO))
    from hostcheck.policy import load_shipped, shipped_policy_names
    from hostcheck.rules_age import newest_read

    return newest_read(load_shipped(name) for name in shipped_policy_names()) or ""


class Outline(HTMLParser):
    """The headings of an HTML page (h1 to h3), each indented by its level."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.level = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h1", "h2", "h3"):
            self.level = int(tag[1])
            self.lines.append("  " * (self.level - 1))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h1", "h2", "h3"):
            self.level = 0

    def handle_data(self, data: str) -> None:
        if self.level:
            self.lines[-1] += data


def outline(html: str) -> str:
    parser = Outline()
    parser.feed(html)
    return "".join(line.rstrip() + "\n" for line in parser.lines)


def block(command: str, kind: str = "example") -> str:
    output = run(command) if kind == "example" else outline(run(command))
    return f"```text\n$ {command}\n{output}{'' if output.endswith(chr(10)) or not output else chr(10)}```\n"


def regenerate(text: str) -> str:
    return EXAMPLE.sub(lambda m: m.group(1) + block(m.group("command"), m.group("kind")) + m.group(5), text)


def differences(path: Path) -> list[str]:
    """The commands whose example in ``path`` is not what the tool prints now."""
    text = path.read_text()
    return [m.group("command") for m in EXAMPLE.finditer(text)
            if m.group("body") != block(m.group("command"), m.group("kind"))]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path in documents():
        text = path.read_text()
        if check:
            stale += [f"{path.relative_to(REPO)}: {command}" for command in differences(path)]
            continue
        new = regenerate(text)
        if new != text:
            path.write_text(new)
            print(f"rewrote the examples in {path.relative_to(REPO)}")
    for line in stale:
        print(f"out of date: {line}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
