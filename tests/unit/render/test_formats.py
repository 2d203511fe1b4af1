"""The output formats' registry (hostcheck.render.formats): every command's --format offers the
registered formats, each format renders or declines each kind of report, a declined kind is one
line and exit 2, and a new format is one module dropped into the package, nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostcheck.cli import COMMANDS, load_command
from hostcheck.errors import FormatDeclined
from hostcheck.render.formats import DEFAULT, Kind, formats, names, render
from hostcheck.render.views import CheckExplanation
from tests.helpers import REPO, SNAPSHOTS, run_cli

# Each command (and sub-command) that prints a report, and the kind it hands to the formats.
REPORTING = {
    ("audit",): Kind.AUDIT, ("earnings",): Kind.EARNINGS, ("offer",): Kind.OFFER, ("watch", "report"): Kind.WATCH,
    ("fleet", "table"): Kind.FLEET, ("fleet", "diff"): Kind.FLEET_DRIFT, ("fleet", "watch"): Kind.FLEET_WATCH,
    ("policies",): Kind.POLICIES, ("market", "report"): Kind.MARKET_TREND, ("selftest",): Kind.SELFTEST,
}  # fmt: skip


def _command(path: tuple[str, ...]) -> Any:
    command = load_command(path[0])
    for name in path[1:]:
        command = command.commands[name]
    return command


def _choices(command: Any) -> tuple[list[str], Any]:
    """--format's choices (the values of the enum typer offers) and its default."""
    (param,) = [p for p in command.params if "--format" in getattr(p, "opts", [])]
    return [member.value for member in param.type_descriptor.annotation], param.default


def test_format_help_names_the_formats_that_render_the_kind() -> None:
    policies = " ".join(run_cli("policies", "--help").stdout.split())
    assert "How to print the list: table (text for the terminal), json (the data, for programs)." in policies


def test_the_shipped_formats_are_registered_default_first() -> None:
    assert list(formats()) == ["table", "json", "markdown", "html"] and DEFAULT == "table"
    assert formats()["table"].terminal and not any(formats()[name].terminal for name in ("json", "markdown", "html"))


@pytest.mark.parametrize("path", list(REPORTING), ids=[" ".join(p) for p in REPORTING])
def test_every_reporting_command_offers_the_registered_formats(path: tuple[str, ...]) -> None:
    choices, default = _choices(_command(path))
    assert choices == names() and default == DEFAULT


def test_every_command_with_format_is_known_here() -> None:
    """A command that gains --format is added to REPORTING (and so to the tests above)."""
    found = set()
    for name in COMMANDS:
        command = load_command(name)
        subs = command.commands.items() if hasattr(command, "commands") else [("", command)]
        for sub, cmd in subs:
            if any("--format" in getattr(p, "opts", []) for p in cmd.params):
                found.add((name, sub) if sub else (name,))
    assert found == set(REPORTING)


def test_the_text_format_renders_every_kind_and_json_all_but_explanations() -> None:
    assert names(Kind.EXPLAIN_CHECK) == names(Kind.EXPLAIN_AGENT) == ["table"]
    for kind in Kind:
        assert formats()["table"].renders(kind)
        assert formats()["json"].renders(kind) == (kind not in (Kind.EXPLAIN_CHECK, Kind.EXPLAIN_AGENT))
    assert names(Kind.POLICIES) == ["table", "json"]


def test_the_html_format_renders_the_reports_worth_a_page_and_declines_the_rest() -> None:
    """An HTML page for the audit, the earnings, the watch report and the fleet table; the
    others read as well as text."""
    rendered = {kind for kind in Kind if formats()["html"].renders(kind)}
    assert rendered == {Kind.AUDIT, Kind.EARNINGS, Kind.WATCH, Kind.FLEET}
    assert "html" not in names(Kind.OFFER) and "html" in names(Kind.AUDIT)


def test_a_declined_kind_names_the_formats_that_render_it() -> None:
    with pytest.raises(FormatDeclined) as caught:
        render(Kind.EXPLAIN_CHECK, CheckExplanation(meta=None, uses=[]), "markdown")
    assert str(caught.value) == "the markdown format does not render the check explanation; use table"


def test_a_declined_format_on_the_command_line_is_one_line_and_exit_2() -> None:
    proc = run_cli("policies", "--format", "markdown")
    assert proc.returncode == 2 and proc.stdout == ""
    error = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert error == ["Error: Invalid value for '--format' / '-f': "
                     "the markdown format does not render the policy list; use table or json"]


VERDICTS = '''
from hostcheck.render.escape import escape_text
from hostcheck.render.formats import Format, register
from hostcheck.render.views import Kind


def _audit(view, options):
    return "".join(f"{escape_text(p.id)}: {escape_text(str(p.verdict))}\\n" for p in view.report.policies)


register(Format(name="verdicts", help="a line per policy", order=40, renderers={Kind.AUDIT: _audit}))
'''


def test_a_new_format_is_one_module_in_the_package(tmp_path: Path) -> None:
    """docs/CONTRIBUTING.md's "Add an output format": the module alone, in a copy of the package."""
    shutil.copytree(REPO / "hostcheck", tmp_path / "hostcheck", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "hostcheck" / "render" / "formats" / "verdicts.py").write_text(VERDICTS, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "80"}

    def hostcheck(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hostcheck.cli", *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)

    facts = str(SNAPSHOTS / "dedicated-4090.json")
    audit = hostcheck("audit", "--facts", facts, "-p", "vast", "--format", "verdicts")
    assert audit.returncode in (0, 3, 4), audit.stderr
    assert audit.stdout.startswith("vast: ") and audit.stdout.count("\n") == 1
    offer = hostcheck("offer", "--facts", facts, "--format", "verdicts")
    assert offer.returncode == 2 and offer.stdout == ""
    assert "the verdicts format does not render the offer; use table or json or markdown" in offer.stderr
    offer_help, audit_help = (" ".join(hostcheck(cmd, "--help").stdout.split()) for cmd in ("offer", "audit"))
    choices = "table|json|markdown|html|verdicts"
    assert choices in offer_help and choices in audit_help
    # --format's help says what each format that renders the command's report is for
    assert "verdicts (a line per policy)" in audit_help and "verdicts" not in offer_help.replace(choices, "")


def test_loading_the_registry_for_help_loads_no_renderer_or_model() -> None:
    """Every command's --format reads the registry, `hostcheck --help` too: the format modules
    import their renderers (and the report models, pydantic) only when they render."""
    probe = ("import sys; from hostcheck.cli import main; sys.argv = ['hostcheck', '--help']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m == 'hostcheck.models' or m.startswith(('pydantic', "
             "'hostcheck.render.table', 'hostcheck.render.earnings', 'hostcheck.render.watch'))), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert "hostcheck.render.formats" in sys.modules  # (this process: the registry the probe's help read)
    assert proc.stderr.strip() == "[]", proc.stderr
