"""Write the exit-code tables of README.md and docs/*.md from hostcheck.exit_codes.EXIT_CODES.

A table is marked in the Markdown like this; ``: COMMAND`` (optional) keeps that command's rows::

    <!-- exit-codes: audit -->
    | code | meaning |
    ...
    <!-- /exit-codes -->

    .venv/bin/python scripts/gen_exit_codes_doc.py          # rewrite the tables in place
    .venv/bin/python scripts/gen_exit_codes_doc.py --check  # exit 1 naming each file that differs

``scripts/regen`` runs this with the other generators.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from hostcheck.exit_codes import markdown_table

REPO = Path(__file__).resolve().parent.parent
TABLE = re.compile(r"(<!-- exit-codes(?:: (?P<command>[a-z-]+))? -->\n)(?P<body>.*?)(<!-- /exit-codes -->)", re.DOTALL)


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def regenerate(text: str) -> str:
    return TABLE.sub(lambda m: m.group(1) + markdown_table(m.group("command") or "") + m.group(4), text)


def main(argv: list[str]) -> int:
    stale = []
    for path in documents():
        text = path.read_text()
        new = regenerate(text)
        if new == text:
            continue
        if "--check" in argv:
            stale.append(str(path.relative_to(REPO)))
        else:
            path.write_text(new)
            print(f"rewrote the exit codes in {path.relative_to(REPO)}")
    for name in stale:
        print(f"out of date: the exit codes in {name}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
