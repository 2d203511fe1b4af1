#!/usr/bin/env python3
"""Write the table of Vast's self-test checks against hostcheck's in docs/audit.md from
policies/selftest/vast.yaml. The table sits between these marks::

    <!-- selftest-map: vast -->
    ...
    <!-- /selftest-map -->

    .venv/bin/python scripts/gen_selftest_doc.py          # rewrite the table in place
    .venv/bin/python scripts/gen_selftest_doc.py --check  # exit 1 when it is out of date

``scripts/regen`` runs this with the other generators.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hostcheck.checks import load_registry  # noqa: E402
from hostcheck.selftest_map import SelftestMap, Stage, load_selftest_map  # noqa: E402

DOC = ROOT / "docs" / "audit.md"
REGENERATE = ".venv/bin/python scripts/gen_selftest_doc.py"
TABLE = re.compile(r"(<!-- selftest-map: (?P<platform>[a-z-]+) -->\n)(?P<body>.*?)(<!-- /selftest-map -->)", re.DOTALL)
STAGE_WORDS = {Stage.PREFLIGHT: "preflight", Stage.RUNTIME: "test instance"}


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def table(name: str, selftest: SelftestMap) -> str:
    """The Markdown table: one row per self-test check, in the self-test's own order."""
    registry = load_registry()
    sources = ", ".join(f"[{_cell(src.title)}]({src.url}) (read {src.checked})" for src in selftest.sources.values())
    out = [f"Generated from `policies/selftest/{name}.yaml`; "
           f"the ids are those of {sources}.", "",
           "| stage | self-test id | what it checks | predicted by |", "| --- | --- | --- | --- |"]
    for row in selftest.checks:
        if row.predicted_by:
            answer = "; ".join(f"`{check}` {registry[check].title}" for check in row.predicted_by)
        else:
            answer = row.answer
        out.append(f"| {STAGE_WORDS[row.stage]} | `{row.id}` | {_cell(row.title)} | {_cell(answer)} |")
    return "\n".join(out) + "\n"


def regenerate(text: str) -> str:
    return TABLE.sub(lambda m: m.group(1) + table(m.group("platform"), load_selftest_map(m.group("platform"))) + m.group(4), text)


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    if not TABLE.search(text):
        print("docs/audit.md has no <!-- selftest-map: PLATFORM --> table", file=sys.stderr)
        return 1
    new = regenerate(text)
    if "--check" in argv:
        if new != text:
            print(f"the self-test table in docs/audit.md is out of date; regenerate with `{REGENERATE}`",
                  file=sys.stderr)
            return 1
        return 0
    if new != text:
        DOC.write_text(new, encoding="utf-8")
        print("rewrote the self-test table in docs/audit.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
