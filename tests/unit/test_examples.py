"""Every output example in README.md and docs/*.md is what the tool prints now.

Examples are marked ``<!-- example: CMD -->`` ... ``<!-- /example -->`` and written by
``scripts/gen_examples.py`` (``scripts/regen`` runs it); this test reruns each command at 80
columns and compares, so an example cannot drift from the tool.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.helpers import REPO

spec = importlib.util.spec_from_file_location("gen_examples", REPO / "scripts" / "gen_examples.py")
assert spec is not None and spec.loader is not None
gen_examples = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_examples)

MARKED = [p for p in gen_examples.documents() if gen_examples.EXAMPLE.search(p.read_text())]


def test_the_readme_shows_the_reference_laptop_first_screen() -> None:
    readme = (REPO / "README.md").read_text()
    assert "<!-- example: hostcheck audit --facts tests/snapshots/reference-laptop.json -->" in readme
    assert REPO / "README.md" in MARKED


@pytest.mark.parametrize("page", MARKED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_marked_example_is_what_the_tool_prints(page: Path) -> None:
    stale = gen_examples.differences(page)
    assert not stale, f"{page.name}: out of date (run scripts/regen): {stale}"


def test_an_example_that_differs_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- example: hostcheck policies -->\n```text\n$ hostcheck policies\nnot this\n```\n<!-- /example -->\n")
    assert gen_examples.differences(page) == ["hostcheck policies"]
    page.write_text(gen_examples.regenerate(page.read_text()))
    assert gen_examples.differences(page) == []


def test_an_html_report_is_shown_by_its_outline(tmp_path: Path) -> None:
    command = "hostcheck audit --facts tests/snapshots/reference-laptop.json --format html"
    page = tmp_path / "page.md"
    page.write_text(f"<!-- outline: {command} -->\n```text\n$ {command}\nnot this\n```\n<!-- /outline -->\n")
    assert gen_examples.differences(page) == [command]
    page.write_text(gen_examples.regenerate(page.read_text()))
    text = page.read_text()
    shown = text.split("```text")[1].split("```")[0]  # the outline: headings, no markup
    assert "\nhostcheck report — alex-laptop\n  Summary by platform\n" in shown and "<" not in shown
    assert gen_examples.differences(page) == []
