"""A real headless Chromium (Debian's ``chromium``) opens the HTML reports: the reference laptop,
a dedicated box (audit, offer, earnings and a week of watch data in one file), the week's watch
report, a fleet of three hosts, and the hostile corpus's report. One browser session for all
(a launch costs seconds), offline (every host name resolves to nothing); for each page: the
only request is the file itself, the page runs no script, nothing is wider than a 360 px
phone, and a screenshot is kept under ARTIFACTS. A canary page (a report with a script and a
remote image added by this test) shows that the detectors see a script and a request when
there is one, and that the report's Content-Security-Policy blocks both.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.browser import CHROMIUM, Browser, PageVisit
from tests.helpers import SNAPSHOTS, run_cli
from tests.hostile_corpus import hostile_facts
from tests.watch_fixtures import write_week

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test installs it)")

ARTIFACTS = Path(os.environ.get("HOSTCHECK_TEST_ARTIFACTS") or Path(tempfile.gettempdir()) / "hostcheck-artifacts") / "html-report"
WIDTH = 360
PROBES = {
    "width": "document.documentElement.scrollWidth",
    "details": "document.querySelectorAll('details').length",
    "scripts": "document.scripts.length",
    "pwned": "document.documentElement.dataset.pwned || null",
    "canary": "document.documentElement.dataset.canary || null",
    "title": "document.title",
    "text": "document.body.innerText.length",
    "folded": "(() => { const d = document.querySelector('details:not([open]) > :not(summary)');"
              " return d ? d.checkVisibility() : null })()",  # what a closed section holds: shown or not
}
CANARY = ('<script>document.documentElement.dataset.canary = "ran"</script>'
          '<img src="https://canary.invalid/pixel.png" alt="">')


def _write(tmp: Path) -> dict[str, Path]:
    pages: dict[str, Path] = {}
    week = tmp / "week.db"
    write_week(week)
    config = tmp / "earnings.toml"
    config.write_text('electricity = "07-23=0.32,23-07=0.18"\nprice = 0.22\noccupancy = 50\n'
                      'heating = "heat-pump"\ncooling_months = "6-8"\n')
    hostile = tmp / "hostile-facts.json"
    hostile.write_text(json.dumps(hostile_facts()))
    fleet = tmp / "fleet"
    fleet.mkdir()
    for name in ("reference-laptop", "dedicated-4090", "rtx3090-vram-in-use"):
        run_cli("audit", "--facts", str(SNAPSHOTS / f"{name}.json"), "-f", "json", "-o", str(fleet / f"{name}.json"))
    commands: dict[str, list[str]] = {
        "reference-laptop": ["audit", "--facts", str(SNAPSHOTS / "reference-laptop.json"), "-f", "html"],
        "dedicated-box": ["report", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--watch-db", str(week),
                          "--earnings-config", str(config)],
        "watch-week": ["watch", "report", "--db", str(week), "-f", "html"],
        "fleet-of-three": ["fleet", str(fleet), "-f", "html"],
        "hostile": ["report", "--facts", str(hostile), "--earnings-config", str(config)],
    }
    for name, args in commands.items():
        pages[name] = tmp / f"{name}.html"
        proc = run_cli(*args, "-o", str(pages[name]))
        assert pages[name].is_file(), (name, proc.returncode, proc.stderr)
    laptop = pages["reference-laptop"].read_text()
    pages["canary"] = tmp / "canary.html"
    pages["canary"].write_text(laptop.replace("<main>", "<main>" + CANARY, 1))
    start, end = laptop.index('<meta http-equiv="Content-Security-Policy"'), laptop.index('<meta name="referrer"')
    pages["canary-without-csp"] = tmp / "canary-without-csp.html"
    pages["canary-without-csp"].write_text(laptop[:start] + laptop[end:].replace("<main>", "<main>" + CANARY, 1))
    return pages


@pytest.fixture(scope="module")
def visits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PageVisit]:
    pages = _write(tmp_path_factory.mktemp("html"))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser = Browser(width=WIDTH)
    try:
        out = {name: browser.visit(path, PROBES) for name, path in pages.items()}
        browser.call("Emulation.setEmulatedMedia", session=True, media="print")
        out["dedicated-box-print"] = browser.visit(pages["dedicated-box"], PROBES, screenshot_height=0)
    finally:
        browser.close()
    for name, visit in out.items():
        if visit.screenshot:
            (ARTIFACTS / f"{name}.png").write_bytes(visit.screenshot)
    return out


REPORTS = ("reference-laptop", "dedicated-box", "watch-week", "fleet-of-three", "hostile")


@pytest.mark.parametrize("name", REPORTS)
def test_the_report_renders_offline_with_no_script(visits: dict[str, PageVisit], name: str) -> None:
    visit = visits[name]
    assert visit.requests == [visit.url]  # the file itself, nothing else
    assert visit.page_scripts == [] and visit.values["scripts"] == 0 and visit.values["pwned"] is None
    assert visit.values["width"] <= WIDTH  # no horizontal scroll on a phone
    assert visit.values["details"] > 0 and visit.values["text"] > 500 and visit.values["folded"] is False
    assert visit.screenshot.startswith(b"\x89PNG") and (ARTIFACTS / f"{name}.png").is_file()
    assert not [line for line in visit.console if "Content Security Policy" in line], visit.console


def test_the_detectors_see_a_script_and_a_request_and_the_policy_blocks_them(visits: dict[str, PageVisit]) -> None:
    open_page, guarded = visits["canary-without-csp"], visits["canary"]
    assert open_page.values["canary"] == "ran" and open_page.page_scripts == [open_page.url]
    assert "https://canary.invalid/pixel.png" in open_page.requests
    assert guarded.values["canary"] is None and guarded.page_scripts == []
    assert guarded.blocked == {"https://canary.invalid/pixel.png": "csp"}  # asked for, stopped before it left
    blocked: list[Any] = [line for line in guarded.console if "Content Security Policy" in line]
    assert blocked, guarded.console


def test_printing_unfolds_every_section(visits: dict[str, PageVisit]) -> None:
    assert visits["dedicated-box"].values["folded"] is False  # on screen, a closed section shows its summary only
    assert visits["dedicated-box-print"].values["folded"] is True
