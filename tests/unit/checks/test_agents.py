"""Provider agents: the sudoers reader against hostile input, the AGT-* checks as a table, the
owner-risk words a report gives when an agent holds root, and `hostcheck explain AGENT`.

The facts below are shaped like the agents collector's output for the installers modelled in
policies/agents/agents.yaml (Vast's account vastai_kaalia with `ALL=(ALL) NOPASSWD:ALL`,
TensorDock's tensordock with the same rule, Salad's root services, io.net's containers).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.collectors.agents import kernel_params, parse_unit_show, summarise_sudo_journal, unit_state
from hostcheck.collectors.docker_daemon import container_settings
from hostcheck.facts import Unknown, load_snapshot, to_jsonable
from hostcheck.judge import run_check
from hostcheck.knowledge.agent_catalog import Catalog, conflicts, load_catalog
from hostcheck.knowledge.sudoers import includes, matching
from hostcheck.policy import resolve_policies, shipped_policy_names
from hostcheck.report import build_report
from tests.helpers import SNAPSHOTS, run_cli

REGISTRY = load_registry()
VAST_RULE = "vastai_kaalia ALL=(ALL) NOPASSWD:ALL"
VAST_RULE_SHOWN = "vastai_kaalia ALL=(ALL) NOPASSWD: ALL"  # as a finding quotes it: sudo's tag, then a space


# ------------------------------------------------------------------ the sudoers reader
#
# Each table row is a sudoers text and what sudo grants the account under sudoers(5)'s rules,
# the reason written beside it. `visudo -cf` proves every text is valid sudoers syntax, and in
# the root lane the real sudo, given the text as /etc/sudoers in a private mount namespace,
# says whether the account may run a program no rule names (the "unrestricted" answer) and
# each command the row lists.

ACCOUNT = "tensordock"
UID, GID, DOCKER_GID = 1500, 1500, 1501
HOST = socket.gethostname()
SHA224 = "a" * 56  # a digest must have its algorithm's length, or sudo's lexer rejects it
SHA256 = "b" * 64


def load(files: dict[str, str], dirs: dict[str, list[str]] | None = None,
         hostname: str | None = HOST) -> includes.Loaded | Unknown:
    dirs = dirs or {}
    return includes.load(lambda p: files.get(p), lambda d: dirs.get(d), hostname=hostname)


def view(files: dict[str, str], account: str = ACCOUNT, groups: frozenset[str] = frozenset({ACCOUNT, "docker"}),
         dirs: dict[str, list[str]] | None = None, hostname: str | None = HOST) -> dict[str, Any]:
    loaded = load(files, dirs, hostname)
    assert not isinstance(loaded, Unknown), loaded
    return matching.account_view(loaded, account, set(groups), uid=UID, gids={GID, DOCKER_GID})


# (case, sudoers text, scope, root_giving, commands sudo allows as root / refuses as root)
RULES: list[tuple[str, str, str, list[str], dict[str, bool]]] = [
    # The stock rule Vast's and TensorDock's installers append: anything as root, no password.
    ("stock", "tensordock ALL=(ALL) NOPASSWD:ALL", "unrestricted", [], {"/bin/bash": True}),
    # Blanks around the commas of a user list are allowed: the list is admin, tensordock.
    ("user list with blanks", "admin, tensordock ALL=(ALL) NOPASSWD:ALL", "unrestricted", [], {}),
    ("user list with blanks 2", "tensordock , admin ALL=(ALL) NOPASSWD:ALL", "unrestricted", [], {}),
    # A list is read from its end and the last entry that matches decides: ALL matches last.
    ("negated first", "!tensordock, ALL ALL=(ALL) NOPASSWD:ALL", "unrestricted", [], {}),
    # ... and here !tensordock matches last: the rule is not the account's.
    ("negated last", "ALL, !tensordock ALL=(ALL) NOPASSWD:ALL", "none", [], {"/bin/bash": False}),
    ("user alias", "User_Alias AGENTS = vastai_kaalia, tensordock\nAGENTS ALL=(ALL) NOPASSWD: ALL",
     "unrestricted", [], {}),
    ("user alias negated inside", "User_Alias AGENTS = ALL, !tensordock\nAGENTS ALL=(ALL) NOPASSWD: ALL", "none", [], {}),
    ("negated user alias", "User_Alias OTHERS = admin\n!OTHERS, ALL ALL=(ALL) NOPASSWD: ALL", "unrestricted", [], {}),
    ("group", "%docker ALL=(ALL) NOPASSWD:ALL", "unrestricted", [], {}),
    ("group by gid", f"%#{DOCKER_GID} ALL=(ALL) NOPASSWD:ALL", "unrestricted", [], {}),
    ("user by uid", f"#{UID} ALL=(ALL) NOPASSWD:ALL", "unrestricted", [], {}),
    # A Runas_Alias naming root, and root by uid, are root.
    ("runas alias", "Runas_Alias R = root\ntensordock ALL=(R) NOPASSWD: ALL", "unrestricted", [], {"/bin/bash": True}),
    ("runas uid 0", "tensordock ALL=(#0) NOPASSWD: ALL", "unrestricted", [], {"/bin/bash": True}),
    ("runas ALL:ALL", "tensordock ALL=(ALL:ALL) NOPASSWD: ALL", "unrestricted", [], {}),
    # A run-as list that is not root's.
    ("runas nobody", "tensordock ALL=(nobody) NOPASSWD: ALL", "restricted", [], {"/bin/bash": False}),
    # Group-only run-as lists (as the account itself, with that group): any group, or docker's,
    # is root by another name (`sudo -g docker docker run -v /:/host ...`); the video group is not.
    ("runas group ALL", "tensordock ALL=(:ALL) NOPASSWD: ALL", "unrestricted", [], {"/bin/bash": True}),
    ("runas group docker", "tensordock ALL=(:docker) NOPASSWD: ALL", "unrestricted", [], {"/bin/bash": True}),
    ("runas group alias", "Runas_Alias G = disk\ntensordock ALL=(:G) NOPASSWD: ALL", "unrestricted", [], {}),
    ("runas group video", "tensordock ALL=(:video) NOPASSWD: ALL", "restricted", [], {"/bin/bash": False}),
    # A Runas_Spec holds for the commands after it in the rule until the next one: ALL as root.
    ("runas per command", "tensordock ALL=(root) NOPASSWD: ALL, (nobody) /bin/true", "unrestricted", [],
     {"/bin/bash": True}),
    ("runas later", "tensordock ALL=(nobody) /bin/true, (root) NOPASSWD: ALL", "unrestricted", [], {}),
    ("runas carried", "tensordock ALL=(root) NOPASSWD: /bin/true, ALL", "unrestricted", [], {"/bin/bash": True}),
    ("runas carried not root", "tensordock ALL=(nobody) NOPASSWD: /bin/true, ALL", "restricted", [],
     {"/bin/bash": False}),
    # No Runas_Spec at all: sudo's runas_default, root.
    ("cmnd alias", "Cmnd_Alias EVERY = ALL\ntensordock ALL = NOPASSWD: EVERY", "unrestricted", [], {}),
    # A wildcard over a bin directory reaches shells and editors; one that reaches none does not.
    ("wildcard dir", "tensordock ALL=(root) NOPASSWD: /usr/bin/*", "restricted", ["/usr/bin/*"], {"/usr/bin/id": True}),
    ("wildcard prefix", "tensordock ALL=(root) NOPASSWD: /usr/bin/n*", "restricted", ["/usr/bin/n*"], {}),
    ("wildcard harmless", "tensordock ALL=(root) NOPASSWD: /usr/bin/nvidia-*", "restricted", [], {}),
    ("directory", "tensordock ALL=(root) NOPASSWD: /usr/sbin/", "restricted", ["/usr/sbin/"], {}),
    # A digest before the command: the command is still judged.
    ("sha224 digest", f"tensordock ALL=(root) NOPASSWD: sha224:{SHA224} /bin/bash", "restricted", ["/bin/bash"], {}),
    ("sha256 digest", f"tensordock ALL=(root) NOPASSWD: sha256:{SHA256} /usr/bin/id", "restricted", [], {}),
    ("digest list", f"tensordock ALL=(root) NOPASSWD: sha224:{SHA224}, sha256:{SHA256} /usr/bin/python3 *",
     "restricted", ["/usr/bin/python3 *"], {}),
    # A denied command is never a root-giving one; and it does not take ALL back (sudoers(5):
    # ALL with exceptions is easily circumvented).
    ("ALL but su", "tensordock ALL=(ALL) NOPASSWD: ALL, !/bin/su", "unrestricted", [], {"/bin/bash": True}),
    ("denied su", "tensordock ALL=(ALL) NOPASSWD: /usr/bin/id, !/bin/su", "restricted", [], {"/usr/bin/id": True}),
    # The last rule that matches decides: a later denial takes the command back.
    ("later denial", "tensordock ALL=(root) NOPASSWD: /bin/bash, !/bin/bash", "restricted", [], {"/bin/bash": False}),
    ("later !ALL", "tensordock ALL=(ALL) NOPASSWD: ALL\ntensordock ALL=(ALL) !ALL", "restricted", [],
     {"/bin/bash": False}),
    ("ALL after !ALL", "tensordock ALL=(ALL) !ALL\ntensordock ALL=(ALL) NOPASSWD: ALL", "unrestricted", [], {}),
    ("denied alias", "Cmnd_Alias SHELLS = /bin/sh, /bin/bash\ntensordock ALL=(root) NOPASSWD: /bin/bash, !SHELLS",
     "restricted", [], {"/bin/bash": False}),
    # A rule for another host does not apply here; one for this host does.
    ("other host", "Host_Alias ELSEWHERE = not-this-host-x1\ntensordock ELSEWHERE=(ALL) NOPASSWD: ALL", "none", [], {}),
    ("this host", f"tensordock {HOST}=(ALL) NOPASSWD: ALL", "unrestricted", [], {}),
    ("two hosts", f"tensordock not-this-host-x1=(ALL) NOPASSWD: ALL : {HOST}=(root) /usr/bin/id", "restricted", [], {}),
    # Spelling: blanks around '=', a trailing comment, a continuation line, options before tags.
    ("spacing", "tensordock ALL = (ALL) NOPASSWD : ALL", "unrestricted", [], {}),
    ("comment", "tensordock ALL=(ALL) NOPASSWD:ALL # the agent", "unrestricted", [], {}),
    ("continuation", "tensordock ALL=(ALL) \\\n  NOPASSWD:ALL", "unrestricted", [], {}),
    ("option", "tensordock ALL=(ALL) CWD=* NOPASSWD: ALL", "unrestricted", [], {}),
    ("someone else", "admin ALL=(ALL) NOPASSWD:ALL", "none", [], {}),
]


def visudo_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([VISUDO, "-cf", str(path)], capture_output=True, text=True, timeout=30)


VISUDO = shutil.which("visudo") or "/usr/sbin/visudo"
needs_visudo = pytest.mark.skipif(not Path(VISUDO).exists(), reason="visudo (Debian package sudo) is not installed")


@pytest.mark.parametrize(("case", "text", "scope", "giving", "_commands"), RULES, ids=[r[0] for r in RULES])
def test_what_a_rule_grants(case: str, text: str, scope: str, giving: list[str], _commands: dict[str, bool]) -> None:
    got = view({"/etc/sudoers": text + "\n"})
    assert (got["scope"], got["root_giving"], got["gaps"]) == (scope, giving, []), got


@needs_visudo
@pytest.mark.parametrize(("case", "text"), [(r[0], r[1]) for r in RULES], ids=[r[0] for r in RULES])
def test_every_rule_is_valid_sudoers(tmp_path: Path, case: str, text: str) -> None:
    path = tmp_path / "sudoers"
    path.write_text(text + "\n")
    proc = visudo_check(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_rule_text_is_normalised_and_names_file_and_line() -> None:
    text = f"root ALL=(ALL:ALL) ALL\n%sudo ALL=(ALL:ALL) ALL\n# To allow Vast.ai host daemon to administer configuration\n{VAST_RULE}\n"
    got = view({"/etc/sudoers": text}, account="vastai_kaalia")
    assert got["scope"] == "unrestricted"
    assert [(r["file"], r["line"], r["rule"], r["nopasswd"]) for r in got["rules"]] == [
        ("/etc/sudoers", 4, "vastai_kaalia ALL=(ALL) NOPASSWD: ALL", True)]
    assert (got["syslog"], got["io_logging"]) == (True, False)  # sudo's defaults


@pytest.mark.parametrize(("defaults", "io_logging", "syslog"), [
    ("Defaults:tensordock log_output, log_input, iolog_dir=/var/log/sudo-io/%{user}", True, True),
    ("Defaults log_output", True, True),
    ("Defaults:vastai_kaalia log_output", False, True),
    ("Defaults:tensordock !syslog", False, False),
    ("Defaults:tensordock log_output\nDefaults:tensordock !log_output", False, True),
    ("Defaults:%docker log_input", True, True),
    ("User_Alias AG = tensordock\nDefaults:AG log_output", True, True),
    # Defaults for every command, and for commands run as root, apply to the account's too.
    ("Defaults!ALL log_output", True, True),
    ("Defaults>root log_output", True, True),
    ("Defaults>nobody log_output", False, True),
    # A user default is applied after the global one, whatever the order in the file.
    ("Defaults:tensordock !log_output\nDefaults log_output", False, True),
])
def test_defaults_that_log_the_account(defaults: str, io_logging: bool, syslog: bool) -> None:
    got = view({"/etc/sudoers": f"{defaults}\ntensordock ALL=(ALL) NOPASSWD:ALL\n"})
    assert (got["io_logging"], got["syslog"]) == (io_logging, syslog)


def test_log_tags_on_the_rule_count_for_its_commands() -> None:
    assert view({"/etc/sudoers": "tensordock ALL=(ALL) NOPASSWD: LOG_OUTPUT: ALL\n"})["io_logging"] is True
    off = view({"/etc/sudoers": "Defaults log_output\ntensordock ALL=(ALL) NOPASSWD: NOLOG_OUTPUT: ALL\n"})
    assert off["io_logging"] is False


# ------------------------------------------------------------------ includes


def test_an_includedir_is_read_in_lexical_order_skipping_dotted_and_backup_names() -> None:
    files = {"/etc/sudoers": "@includedir /etc/sudoers.d\n", "/etc/sudoers.d/90-cloud-init-users": VAST_RULE + "\n",
             "/etc/sudoers.d/README": "# nothing\n", "/etc/sudoers.d/10-first": "# nothing\n"}
    got = view(files, account="vastai_kaalia",
               dirs={"/etc/sudoers.d": ["README", "90-cloud-init-users", "old.bak", "editor~", "10-first", "x.conf"]})
    assert got["scope"] == "unrestricted" and got["gaps"] == []
    # sudo skips names with a '.' or ending in '~' and reads the others in lexical order
    assert got["files_read"] == ["/etc/sudoers", "/etc/sudoers.d/10-first", "/etc/sudoers.d/90-cloud-init-users",
                                 "/etc/sudoers.d/README"]


DROPIN = {"/etc/sudoers.d/agent": "tensordock ALL=(ALL) NOPASSWD:ALL\n"}
DIR = {"/etc/sudoers.d": ["agent"]}
INCLUDES: list[tuple[str, str, dict[str, str], dict[str, list[str]], list[str]]] = [
    # (case, /etc/sudoers, other files, directories, files read after /etc/sudoers)
    ("#includedir", "#includedir /etc/sudoers.d", DROPIN, DIR, ["/etc/sudoers.d/agent"]),
    ("@includedir", "@includedir /etc/sudoers.d", DROPIN, DIR, ["/etc/sudoers.d/agent"]),
    ("quoted", '@includedir "/etc/sudoers.d"', DROPIN, DIR, ["/etc/sudoers.d/agent"]),
    ("tab", "#includedir\t/etc/sudoers.d", DROPIN, DIR, ["/etc/sudoers.d/agent"]),
    # sudoers(5): a relative path lies in the directory of the file that includes it.
    ("relative dir", "@includedir sudoers.d", DROPIN, DIR, ["/etc/sudoers.d/agent"]),
    ("relative file", "@include sudoers.local", {"/etc/sudoers.local": DROPIN["/etc/sudoers.d/agent"]}, {},
     ["/etc/sudoers.local"]),
    ("relative from a drop-in", "@includedir /etc/sudoers.d",
     {"/etc/sudoers.d/a": "@include b\n", "/etc/sudoers.d/b": DROPIN["/etc/sudoers.d/agent"]},
     {"/etc/sudoers.d": ["a"]}, ["/etc/sudoers.d/a", "/etc/sudoers.d/b"]),
    ("escaped blank", "@include /etc/sudoers\\ local", {"/etc/sudoers local": DROPIN["/etc/sudoers.d/agent"]}, {},
     ["/etc/sudoers local"]),
    # %h is the short host name.
    ("host name", "@include /etc/sudoers.%h", {f"/etc/sudoers.{HOST.split('.')[0]}": DROPIN["/etc/sudoers.d/agent"]},
     {}, [f"/etc/sudoers.{HOST.split('.')[0]}"]),
]


@pytest.mark.parametrize(("case", "main", "files", "dirs", "read"), INCLUDES, ids=[c[0] for c in INCLUDES])
def test_includes_are_followed(case: str, main: str, files: dict[str, str], dirs: dict[str, list[str]],
                               read: list[str]) -> None:
    got = view({"/etc/sudoers": main + "\n", **files}, dirs=dirs)
    assert (got["scope"], got["files_read"], got["gaps"]) == ("unrestricted", ["/etc/sudoers", *read], [])


@pytest.mark.parametrize("line", ["  #include /etc/sudoers.d/agent", "#include_not_a_directive /etc/sudoers.d/agent",
                                  "#includedir"])
def test_what_only_looks_like_an_include_is_a_comment(line: str) -> None:
    got = view({"/etc/sudoers": line + "\n", **DROPIN}, dirs=DIR)
    assert (got["scope"], got["files_read"]) == ("none", ["/etc/sudoers"])


def test_a_missing_include_directory_is_ignored_as_sudo_ignores_it() -> None:
    got = view({"/etc/sudoers": "@includedir /etc/sudoers.d\n"})
    assert (got["scope"], got["gaps"]) == ("none", [])


GAPS: list[tuple[str, dict[str, str], dict[str, Any], str]] = [
    # (case, files, directories, a phrase of the gap): nothing readable grants root, so the
    # answer is unknown, never "none".
    ("unreadable directory", {"/etc/sudoers": "@includedir /etc/sudoers.d\n"},
     {"/etc/sudoers.d": Unknown("permission denied listing /etc/sudoers.d (needs root)")},
     "/etc/sudoers.d (included from /etc/sudoers:1) could not be listed: permission denied"),
    ("unreadable file", {"/etc/sudoers": "@includedir /etc/sudoers.d\n",
                         "/etc/sudoers.d/agent": Unknown("permission denied reading /etc/sudoers.d/agent")},  # type: ignore[dict-item]
     DIR, "/etc/sudoers.d/agent (included from /etc/sudoers:1) could not be read: permission denied"),
    ("missing include", {"/etc/sudoers": "@include /etc/sudoers.local\n"}, {},
     "/etc/sudoers.local (included from /etc/sudoers:1) does not exist"),
    ("host name unknown", {"/etc/sudoers": "@include /etc/sudoers.%h\n"}, {}, "names the host (%h)"),
    ("too deep", {"/etc/sudoers": "@include /etc/f1\n",
                  **{f"/etc/f{i}": f"@include /etc/f{i + 1}\n" for i in range(1, includes.MAX_INCLUDE_DEPTH + 2)}},
     {}, f"is more than {includes.MAX_INCLUDE_DEPTH} includes deep"),
    ("line not understood", {"/etc/sudoers": "tensordock ALL=(ALL) NOPASSWD ALL\n"}, {},
     "/etc/sudoers:1 not understood and may name tensordock"),
    ("netgroup", {"/etc/sudoers": "+agents ALL=(ALL) NOPASSWD: ALL\n"}, {}, "+agents (netgroups or non-Unix groups)"),
    ("too many rules", {"/etc/sudoers": "".join(f"user{i} ALL=(ALL) ALL\n" for i in range(includes.MAX_RULES))
                        + "tensordock ALL=(ALL) NOPASSWD:ALL\n"}, {},
     f"more than {includes.MAX_RULES} rules: /etc/sudoers:{includes.MAX_RULES + 1} and the rules after it not read"),
]


@pytest.mark.parametrize(("case", "files", "dirs", "phrase"), GAPS, ids=[g[0] for g in GAPS])
def test_what_cannot_be_read_makes_the_scope_unknown_with_the_reason(
        case: str, files: dict[str, Any], dirs: dict[str, Any], phrase: str) -> None:
    loaded = includes.load(lambda p: files.get(p), lambda d: dirs.get(d), hostname=None if "%h" in phrase else HOST)
    assert not isinstance(loaded, Unknown)
    got = matching.account_view(loaded, ACCOUNT, {ACCOUNT})
    assert got["scope"] == "unknown"
    assert any(phrase in gap for gap in got["gaps"]), got["gaps"]


def test_a_grant_read_before_a_gap_stands() -> None:
    got = view({"/etc/sudoers": "tensordock ALL=(ALL) NOPASSWD:ALL\n@includedir /etc/sudoers.d\n"},
               dirs={"/etc/sudoers.d": Unknown("permission denied")})  # type: ignore[dict-item]
    assert got["scope"] == "unrestricted" and got["unreadable"] == ["/etc/sudoers.d"] and len(got["gaps"]) == 1


def test_an_unreadable_sudoers_is_unknown_with_the_reason() -> None:
    got = includes.load(lambda p: Unknown(f"permission denied reading {p} (needs root)"), lambda d: [])
    assert isinstance(got, Unknown) and "permission denied reading /etc/sudoers" in got.reason


def test_files_are_read_in_sudos_order_so_the_last_rule_decides() -> None:
    """An included file's rules take the place of the directive: a drop-in's !ALL after the
    grant takes it back; a grant after the directive stands."""
    dropin = {"/etc/sudoers.d/deny": "tensordock ALL=(ALL) !ALL\n"}
    before = view({"/etc/sudoers": "tensordock ALL=(ALL) NOPASSWD:ALL\n@includedir /etc/sudoers.d\n", **dropin},
                  dirs={"/etc/sudoers.d": ["deny"]})
    after = view({"/etc/sudoers": "@includedir /etc/sudoers.d\ntensordock ALL=(ALL) NOPASSWD:ALL\n", **dropin},
                 dirs={"/etc/sudoers.d": ["deny"]})
    assert (before["scope"], after["scope"]) == ("restricted", "unrestricted")


def test_a_file_past_the_size_bound_is_a_stated_gap() -> None:
    filler = "# " + "x" * 78 + "\n"
    text = filler * (includes.MAX_FILE_CHARS // len(filler) + 1) + "tensordock ALL=(ALL) NOPASSWD:ALL\n"
    got = view({"/etc/sudoers": text})
    # the rule lies past the bound: not read, and said so
    assert got["scope"] == "unknown"
    assert got["gaps"] == [f"/etc/sudoers is longer than {includes.MAX_FILE_CHARS} characters: the rest was not read"]


def test_a_directory_past_the_file_bound_is_sorted_first_then_cut_and_said() -> None:
    names = [f"f{i:05d}" for i in range(5000)]
    files = {"/etc/sudoers": "@includedir /etc/sudoers.d\n", **{f"/etc/sudoers.d/{n}": "# x\n" for n in names}}
    files["/etc/sudoers.d/f00000"] = "tensordock ALL=(ALL) NOPASSWD:ALL\n"
    got = view(files, dirs={"/etc/sudoers.d": list(reversed(names))})  # the listing comes unsorted
    room = includes.MAX_FILES - 1  # /etc/sudoers itself is one
    assert got["files_read"] == ["/etc/sudoers", *(f"/etc/sudoers.d/{n}" for n in names[:room])]
    assert got["scope"] == "unrestricted"  # f00000 comes first in sudo's order
    assert got["gaps"] == [f"/etc/sudoers.d holds 5000 sudoers files: only the first {room} in sudo's (lexical) "
                           f"order were read, up to {names[room - 1]}"]
    without = view({**files, "/etc/sudoers.d/f00000": "# x\n"}, dirs={"/etc/sudoers.d": names})
    assert without["scope"] == "unknown"


def test_include_loops_are_cut() -> None:
    files = {"/etc/sudoers": "@include /etc/a\n", "/etc/a": "@include /etc/b\n",
             "/etc/b": f"@include /etc/a\n#include /etc/sudoers\n{VAST_RULE}\n"}
    got = view(files, account="vastai_kaalia")
    assert got["files_read"] == ["/etc/sudoers", "/etc/a", "/etc/b"] and got["scope"] == "unrestricted"


def test_the_collectors_readers_on_a_real_tree(tmp_path: Path) -> None:
    """The sudoers file and directory readers the collectors share, on real files: regular files
    only, every name listed, a missing directory None, the size bound seen."""
    from hostcheck.collectors.accounts import _listdir, _read_sudoers

    root = tmp_path / "sudoers"
    (tmp_path / "sudoers.d").mkdir()
    (tmp_path / "sudoers.d" / "agent").write_text("tensordock ALL=(ALL) NOPASSWD:ALL\n")
    (tmp_path / "sudoers.d" / "sub").mkdir()  # not a regular file: sudo skips it
    # a '.' keeps the includedir from reading it; the quotes keep the blank in its name
    (tmp_path / "sudoers.d" / "my local.conf").write_text("Runas_Alias R = root\ntensordock ALL=(R) /usr/bin/id\n")
    root.write_text('@includedir sudoers.d\n@include "sudoers.d/my local.conf"\n')
    loaded = includes.load(_read_sudoers, _listdir, root=str(root), hostname=HOST)
    assert not isinstance(loaded, Unknown)
    got = matching.account_view(loaded, ACCOUNT, {ACCOUNT})
    assert got["files_read"] == [str(root), f"{tmp_path}/sudoers.d/agent", f"{tmp_path}/sudoers.d/my local.conf"]
    assert (got["scope"], got["gaps"]) == ("unrestricted", [])
    assert _listdir(str(tmp_path / "absent")) is None
    big = tmp_path / "big"
    big.write_text("#" * (includes.MAX_FILE_CHARS + 10))
    text = _read_sudoers(str(big))
    assert isinstance(text, str) and len(text) == includes.MAX_FILE_CHARS + 1
    if Path(VISUDO).exists():
        proc = visudo_check(root)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hostile_text_neither_hangs_nor_crashes() -> None:
    bomb = "\\\n" * 200_000 + VAST_RULE  # a continuation chain far past the line bound
    nul = "vastai_kaalia\0 ALL=(ALL) NOPASSWD:ALL\n"
    junk = "".join(chr(c) for c in range(1, 0x250)) + "\n=(=)=:,,\\,\n(((\nvastai_kaalia\nvastai_kaalia ALL=(\n"
    alias_cycle = "Cmnd_Alias A = B\nCmnd_Alias B = A\nUser_Alias U = V\nUser_Alias V = U\nU ALL = NOPASSWD: A\n"
    wide = "vastai_kaalia ALL=(root) " + ", ".join(f"/bin/p{i}" for i in range(5000)) + "\n"
    quotes = 'vastai_kaalia ALL=(ALL) "NOPASSWD: ALL\n@include "unterminated\n'
    for text in (bomb, nul, junk, alias_cycle, wide, quotes):
        got = view({"/etc/sudoers": text}, account="vastai_kaalia")
        assert got["scope"] in ("none", "restricted", "unrestricted", "unknown")
        assert all(len(r["rule"]) <= 400 for r in got["rules"])
    assert view({"/etc/sudoers": nul}, account="vastai_kaalia")["scope"] == "unrestricted"  # NUL bytes are dropped
    assert view({"/etc/sudoers": junk}, account="vastai_kaalia")["unparsed_lines"] >= 3


def test_a_uid_is_not_a_comment_but_a_hash_is() -> None:
    got = view({"/etc/sudoers": f"#{UID} ALL=(ALL) NOPASSWD:ALL # trailing comment\n"})
    assert [r["rule"] for r in got["rules"]] == [f"#{UID} ALL=(ALL) NOPASSWD: ALL"]


def test_the_allowlist_template_still_gives_root() -> None:
    """The role's Vast allowlist (rendered with its default account) is restricted, and the
    reader says which of its commands still give root (the reason it is only a tripwire)."""
    template = (Path(__file__).parents[3] / "roles" / "agent_oversight" / "templates" / "vast-allowlist.sudoers.j2").read_text()
    got = view({"/etc/sudoers": template.replace("{{ agent_oversight_vast_account }}", "vastai_kaalia")},
               account="vastai_kaalia")
    assert got["scope"] == "restricted" and got["gaps"] == []
    giving = set(got["root_giving"])
    assert {"/usr/bin/systemd-run --scope --unit=vastai_script_updater *", "/usr/bin/virsh *",
            "/usr/bin/cp -f * /usr/local/bin/vastai-run-update"} <= giving
    assert "/usr/bin/ss *" not in giving


# ------------------------------------------------------------------ the real sudo agrees


real_sudo = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("sudo") or not shutil.which("unshare") or not Path("/etc/sudoers.d").is_dir(),
    reason="asks the real sudo in a private mount namespace: needs root, sudo (with /etc/sudoers.d) and unshare")


def _real_sudo(tmp_path: Path, text: str, commands: list[str], dropins: dict[str, str] | None = None,
               runas: str = "-u root") -> dict[str, bool]:
    """Ask the real sudo, with ``text`` as /etc/sudoers (and ``dropins`` as the files of
    /etc/sudoers.d) and an account ``tensordock`` in the passwd and group files, in a private
    mount namespace (nothing outside it changes): may the account run each command as root
    (or as ``runas`` says: ``-g docker``)? "*" is a program no rule names."""
    fresh = tmp_path / "fresh-program"
    fresh.write_text("#!/bin/sh\n")
    fresh.chmod(0o755)
    sudoers_file = tmp_path / "sudoers"
    sudoers_file.write_text(text + "\n")
    sudoers_file.chmod(0o440)
    passwd, group = tmp_path / "passwd", tmp_path / "group"
    passwd.write_text(Path("/etc/passwd").read_text() + f"{ACCOUNT}:x:{UID}:{GID}::/nonexistent:/bin/sh\n")
    groups = Path("/etc/group").read_text()
    docker = "" if re.search(r"^docker:", groups, re.M) else f"docker:x:{DOCKER_GID + 1}:\n"
    group.write_text(groups + f"{ACCOUNT}:x:{GID}:\ndocker-test:x:{DOCKER_GID}:{ACCOUNT}\n{docker}")
    folder = tmp_path / "sudoers.d"
    folder.mkdir(mode=0o750)
    for name, content in (dropins or {}).items():
        (folder / name).write_text(content)
        (folder / name).chmod(0o440)
    asked = [str(fresh) if c == "*" else c for c in commands]
    script = " && ".join(f"mount --bind {src} {dst}" for src, dst in (
        (passwd, "/etc/passwd"), (group, "/etc/group"), (sudoers_file, "/etc/sudoers"), (folder, "/etc/sudoers.d")))
    script += "".join(f"; sudo -n -U {ACCOUNT} {runas} -l {shlex.quote(c)} >/dev/null 2>&1; echo $?" for c in asked)
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    codes = proc.stdout.split()
    assert len(codes) == len(commands), proc.stdout + proc.stderr
    return {c: code == "0" for c, code in zip(commands, codes, strict=True)}


@pytest.mark.root
@real_sudo
@pytest.mark.parametrize(("case", "text", "scope", "giving", "commands"),
                         [r for r in RULES if "%docker" not in r[1]], ids=[r[0] for r in RULES if "%docker" not in r[1]])
def test_the_real_sudo_agrees(tmp_path: Path, case: str, text: str, scope: str, giving: list[str],
                              commands: dict[str, bool]) -> None:
    # a group-only rule gives root through the group: ask for that group
    runas = {"runas group alias": "-g disk"}.get(case, "-g docker" if case.startswith("runas group") else "-u root")
    answers = _real_sudo(tmp_path, text, ["*", *commands], runas=runas)
    assert answers["*"] == (scope == "unrestricted"), f"sudo says {answers['*']} for a program no rule names"
    assert {c: answers[c] for c in commands} == commands


# ------------------------------------------------------------------ collector helpers


def test_sudo_journal_summary_counts_only_agent_accounts_and_survives_junk() -> None:
    def line(message: Any) -> str:
        return json.dumps({"MESSAGE": message, "SYSLOG_IDENTIFIER": "sudo"})

    lines = [
        line("vastai_kaalia : PWD=/var/lib/vastai_kaalia ; USER=root ; COMMAND=/usr/bin/id -u"),
        line("vastai_kaalia : PWD=/ ; USER=root ; COMMAND=/usr/bin/id -u"),
        line("vastai_kaalia : a password is required ; PWD=/ ; USER=root ; COMMAND=/usr/bin/cat /etc/shadow"),
        line("admin : PWD=/home/admin ; USER=root ; COMMAND=/bin/sh -c true"),
        line("vastai_kaalia : PWD=/ ; USER=root ; COMMAND=/x " + "A" * 5000),
        line(["not", "a", "string"]), "{not json", json.dumps([1, 2]), "",
        line("pam_unix(sudo:session): session opened for user root(uid=0) by (uid=0)"),
    ]
    got = summarise_sudo_journal(lines, {"vastai_kaalia"})
    assert got["entries"] == 4  # the four vastai_kaalia command lines
    commands = {(c["command"], c["outcome"]): c["count"] for c in got["commands"]}
    assert commands[("/usr/bin/id -u", "ran")] == 2
    assert commands[("/usr/bin/cat /etc/shadow", "refused")] == 1
    assert all(len(c["command"]) <= 200 and c["user"] == "vastai_kaalia" for c in got["commands"])


def test_unit_show_parsing_and_kernel_params() -> None:
    text = ("Id=vastai.service\nLoadState=loaded\nUnitFileState=enabled\nActiveState=active\n\n"
            "Id=crisper.service\nLoadState=not-found\nUnitFileState=\nActiveState=inactive\n")
    assert parse_unit_show(text)["vastai.service"]["ActiveState"] == "active"
    assert parse_unit_show(text)["crisper.service"]["LoadState"] == "not-found"
    got = kernel_params("BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on nvidia_drm.modeset=0 "
                        "vfio_iommu_type1.allow_unsafe_interrupts=1 quiet")
    assert got == {"intel_iommu": "on", "nvidia_drm.modeset": "0", "vfio_iommu_type1.allow_unsafe_interrupts": "1"}


def test_container_settings_keep_name_and_image_only_of_what_agents_match() -> None:
    inspected = {"Name": "/io-worker-vc", "Config": {"Image": "ionetcontainers/io-worker-vc:latest", "Env": ["SECRET=1"]},
                 "HostConfig": {"NetworkMode": "bridge"}}
    got = container_settings(inspected)
    assert got is not None
    assert (got["name"], got["image"]) == ("io-worker-vc", "ionetcontainers/io-worker-vc:latest")
    assert "SECRET=1" not in repr(got)


# ------------------------------------------------------------------ the checks


def account(name: str, groups: list[str]) -> dict[str, Any]:
    return {"name": name, "uid": 999, "shell": "/bin/bash", "groups": groups, "gids": [999]}


def sudoers_read(*rules: str, unlisted_dir: bool = False) -> dict[str, Any]:
    """``agents.sudoers`` as the collector records it: /etc/sudoers with ``rules`` from line 31
    and, with ``unlisted_dir``, an ``@includedir /etc/sudoers.d`` on line 50 whose listing is
    refused."""
    lines = [f"# line {n}" for n in range(1, 31)] + list(rules)
    if unlisted_dir:
        lines += [f"# line {n}" for n in range(len(lines) + 1, 50)] + ["@includedir /etc/sudoers.d"]
    files = {"/etc/sudoers": "\n".join(lines) + "\n"}
    return includes.record(files.get, lambda d: Unknown("permission denied") if unlisted_dir else None)


def vast(groups: list[str] | None = None, channel: bool = True) -> dict[str, Any]:
    return {"id": "vast", "platform": "Vast.ai", "evidence": ["account vastai_kaalia", "unit vastai.service"],
            "accounts": [account("vastai_kaalia", ["docker"] if groups is None else groups)],
            "units": [{"name": "vastai.service", "present": True, "enabled": "enabled", "active": True}],
            "update_channel": ["/var/lib/vastai_kaalia/update_launcher.sh"] if channel else [], "packages": []}


def vast_with_restarts(restarts: int | Unknown) -> dict[str, Any]:
    entry = vast()
    entry["units"] = [{**entry["units"][0], "restarts": restarts}]
    return entry


SALAD = {"id": "salad", "platform": "Salad (Linux beta)", "evidence": ["unit crisper.service"], "accounts": [],
         "units": [], "update_channel": [], "packages": ["salad-platform"]}
TENSORDOCK = {"id": "tensordock", "platform": "TensorDock", "evidence": ["account tensordock"],
              "accounts": [account("tensordock", ["tensordock"])],
              "units": [], "update_channel": [], "packages": []}
GAP = "/etc/sudoers.d (included from /etc/sudoers:50) could not be listed: permission denied"


# Both agents' accounts may run anything as root (the default of the cases below).
UNRESTRICTED = sudoers_read(VAST_RULE, "tensordock ALL=(ALL) NOPASSWD:ALL")
DENIED = includes.record(lambda p: Unknown("permission denied reading /etc/sudoers (needs root)"), lambda d: None)
GIVING = sudoers_read("vastai_kaalia ALL=(root) NOPASSWD: /usr/bin/virsh *")  # virsh: a root shell by another door
NOT_GIVING = sudoers_read("vastai_kaalia ALL=(root) NOPASSWD: /usr/bin/ss *")
PARTLY_READ = sudoers_read(unlisted_dir=True)
IO_LOGGED = sudoers_read("Defaults log_output", VAST_RULE)
NO_RULES = sudoers_read()


def facts(*agents: dict[str, Any], containers: Any = (), extra: dict[str, Any] | None = None,
          sudo: dict[str, Any] = UNRESTRICTED) -> dict[str, Any]:
    out: dict[str, Any] = {
        "agents": {"installed": list(agents), "sudoers": sudo, "update_units": {"apt-daily.timer": "enabled"},
                   "sudo_activity": {"since": "2026-12-01T00:00:00Z", "entries": 0, "commands": []}},
        "docker": {"containers": containers if isinstance(containers, Unknown) else list(containers)},
    }
    for key, value in (extra or {}).items():
        out.setdefault(key, {}).update(value)
    return out


def gpus(*ecc: Any) -> dict[str, Any]:
    return {"gpu": {"devices": [{"index": i, "name": "NVIDIA A100-PCIE-40GB", "ecc_enabled": e} for i, e in enumerate(ecc)]}}


PERSONAL: dict[str, Any] = {"isolation": {"graphical_session": True, "display_manager": "gdm3", "credentials": [], "unreadable_homes": []}}
DEDICATED: dict[str, Any] = {"isolation": {"graphical_session": False, "display_manager": None, "credentials": [], "unreadable_homes": []}}
# Docker's random names, io.net's images (as `docker ps` listings in io.net setup guides show them).
IONET_CONTAINERS = [{"name": "goofy_vaughan", "image": "ionetcontainers/io-worker-monitor"},
                    {"name": "friendly_meninsky", "image": "ionetcontainers/io-worker-vc:latest"}]
NOT_SUPPORTED = Unknown("not supported by this GPU/driver")
# The running containers could not be listed: io.net's agent, known only by them, may be here.
BLIND = Unknown("permission denied")
# Docker is not installed: no containers, so no io.net.
NO_DOCKER = {"docker": {"reachable": False, "unreachable_reason": "absent"}}
KEPT = {"packages": {"unattended_upgrades": {"installed": True, "enabled": True}}}

CASES = [
    # (check, facts, threshold, status, measured)
    ("AGT-1010", facts(), None, "pass", 0),
    ("AGT-1010", facts(vast()), None, "fail", 1),
    ("AGT-1010", facts(vast(), sudo=DENIED), None, "fail", 1),  # the docker group settles it without sudoers
    ("AGT-1010", facts(vast(groups=[]), sudo=DENIED), None, "unknown", 0),
    ("AGT-1010", facts(vast(groups=[]), sudo=GIVING), None, "fail", 1),
    ("AGT-1010", facts(vast(groups=[]), sudo=NOT_GIVING), None, "pass", 0),
    # sudoers partly unreadable and nothing read gives root: not a pass
    ("AGT-1010", facts(vast(groups=[]), sudo=PARTLY_READ), None, "unknown", 0),
    ("AGT-1010", facts(vast(), sudo=PARTLY_READ), None, "fail", 1),  # the docker group still
    ("AGT-1010", facts(SALAD), None, "fail", 1),
    ("AGT-1010", facts(containers=IONET_CONTAINERS), None, "fail", 1),  # io.net, known only by its containers
    ("AGT-1010", facts(containers=BLIND), None, "unknown", 0),  # io.net cannot be ruled out
    ("AGT-1010", facts(extra=NO_DOCKER), None, "pass", 0),
    ("OWN-1050", facts(vast(), extra=PERSONAL), None, "fail", "agent root on a personal machine"),
    ("OWN-1050", facts(vast(), extra=DEDICATED), None, "pass", "dedicated machine"),
    ("OWN-1050", facts(extra=PERSONAL), None, "pass", "no agent with root"),
    ("OWN-1050", facts(vast(), extra={"isolation": {"graphical_session": Unknown("no logind")}}), None, "unknown", None),
    ("AGT-1020", facts(vast()), None, "fail", 1),
    ("AGT-1020", facts(vast(channel=False)), None, "fail", 1),  # the installer writes it; it may be unreadable
    ("AGT-1020", facts(SALAD), None, "pass", 0),  # signed apt packages, installed by the owner's own updates
    ("AGT-1020", facts(containers=IONET_CONTAINERS), None, "fail", 1),
    ("AGT-1020", facts(SALAD, containers=BLIND), None, "unknown", 0),  # io.net's launcher cannot be ruled out
    ("AGT-1020", facts(vast(), containers=BLIND), None, "fail", 1),  # Vast's channel is enough
    ("AGT-1020", facts(SALAD, extra=NO_DOCKER), None, "pass", 0),
    ("AGT-1040", facts(containers=IONET_CONTAINERS, extra=gpus(False, True)), None, "fail", 1),
    ("AGT-1040", facts(containers=IONET_CONTAINERS, extra=gpus(NOT_SUPPORTED)), None, "pass", 0),
    ("AGT-1040", facts(containers=IONET_CONTAINERS, extra=gpus(Unknown("NVML unavailable"))), None, "unknown", None),
    ("AGT-1040", facts(vast(), extra=gpus(False)), None, "pass", 0),  # ECC off, but not the agent's doing
    ("AGT-1040", facts(vast(), containers=BLIND, extra=gpus(False)), None, "unknown", None),  # io.net's, unseen?
    ("AGT-1040", facts(containers=BLIND, extra=gpus(True, NOT_SUPPORTED)), None, "pass", 0),  # nothing off
    ("AGT-1040", facts(containers=BLIND), None, "unknown", None),  # no GPU facts at all
    ("AGT-1050", facts(vast(), extra={"packages": {"unattended_upgrades": {"installed": False, "enabled": False}}}),
     None, "fail", "removed"),
    # Vast's headless guide disables the timers and masks the services; either is seen
    ("AGT-1050", facts(vast(), extra={**KEPT, "agents": {"update_units": {"apt-daily.timer": "disabled"}}}),
     None, "fail", "removed"),
    ("AGT-1050", facts(vast(), extra={**KEPT, "agents": {"update_units": {"apt-daily-upgrade.service": "masked"}}}),
     None, "fail", "removed"),
    # a disabled service is the state of a stock system (the timer starts it): not a change
    ("AGT-1050", facts(vast(), extra={**KEPT, "agents": {"update_units": {"apt-daily.timer": "enabled",
                                                                          "apt-daily.service": "static"}}}),
     None, "pass", "kept"),
    ("AGT-1050", facts(vast(), extra=KEPT), None, "pass", "kept"),
    ("AGT-1050", facts(vast(), extra={**KEPT, "agents": {"update_units": Unknown("systemd is not the running init")}}),
     None, "unknown", None),
    ("AGT-1050", facts(SALAD, extra={"packages": {"unattended_upgrades": {"installed": False}}}), None, "pass",
     "not changed"),
    ("AGT-1060", facts(vast()), None, "fail", "not logged"),
    ("AGT-1060", facts(vast(), sudo=IO_LOGGED), None, "pass", "logged"),
    ("AGT-1060", facts(vast(), sudo=DENIED), None, "unknown", None),
    ("AGT-1060", facts(vast(), sudo=PARTLY_READ), None, "unknown", None),
    ("AGT-1060", facts(SALAD), None, "pass", "no agent account"),
    # AGT-1030 judges the platform of the policy (its threshold) against the agents installed:
    # the conflict is shown before the second agent is installed.
    ("AGT-1030", facts(vast()), "vast", "pass", 0),  # its own agent alone
    ("AGT-1030", facts(), "ionet", "pass", 0),
    ("AGT-1030", facts(vast()), "ionet", "fail", 1),  # io.net's setup would rewrite daemon.json under Vast
    ("AGT-1030", facts(vast()), "salad", "fail", 1),  # Salad allows no other docker
    ("AGT-1030", facts(vast()), "tensordock", "fail", 1),  # TensorDock takes the GPUs
    ("AGT-1030", facts(SALAD), "vast", "fail", 1),  # Salad, installed, allows no docker beside it
    ("AGT-1030", facts(containers=IONET_CONTAINERS), "vast", "fail", 1),  # io.net rewrote daemon.json
    ("AGT-1030", facts(vast(), SALAD), "salad", "fail", 1),
    ("AGT-1030", facts(vast(), SALAD, containers=IONET_CONTAINERS), "tensordock", "fail", 3),
    ("AGT-1030", facts(vast(), containers=BLIND), "vast", "unknown", 0),  # io.net may be here unseen
    ("AGT-1030", facts(vast(), containers=BLIND), "ionet", "fail", 1),
    ("AGT-1030", facts(vast()), "nosuch", "unknown", None),
    # without a policy: the installed agents judged against each other
    ("AGT-1030", facts(vast(), SALAD), None, "fail", 2),
    ("AGT-1030", facts(vast()), None, "pass", 0),
    # AGT-1070 reads the restart count of the agent's units (the fuller cases follow the
    # recorded `systemctl show` answer below).
    ("AGT-1070", facts(vast_with_restarts(3)), 3, "fail", 3),
    ("AGT-1070", facts(vast_with_restarts(2)), 3, "pass", 2),
    ("AGT-1070", facts(vast_with_restarts(Unknown("systemd is not the running init"))), 3, "unknown", None),
    ("AGT-1070", facts(), 3, "pass", 0),
]


@pytest.mark.parametrize(("check_id", "given", "threshold", "status", "measured"), CASES)
def test_agent_checks(check_id: str, given: dict[str, Any], threshold: Any, status: str, measured: Any) -> None:
    outcome = run_check(REGISTRY[check_id], given, threshold)
    assert (outcome.status, outcome.measured) == (status, measured), outcome.detail


def test_every_agent_check_has_table_cases_for_pass_fail_and_unknown() -> None:
    ids = {c for c in REGISTRY if c.startswith("AGT-")} | {"OWN-1050"}
    for check_id in ids:
        statuses = {status for c, _, _, status, _ in CASES if c == check_id}
        assert {"pass", "fail", "unknown"} <= statuses, check_id


def test_every_policy_judging_conflicts_names_a_known_agent() -> None:
    catalog = load_catalog()
    for policy in resolve_policies([n for n in shipped_policy_names() if n != "owner-risk"]):
        for requirement in policy.requirements:
            if requirement.check == "AGT-1030":
                assert catalog.get(str(requirement.threshold)) is not None, (policy.id, requirement.threshold)


def test_root_detail_names_the_account_and_the_rule() -> None:
    outcome = run_check(REGISTRY["AGT-1010"], facts(vast()), None)
    assert outcome.detail == ("the platform has root on this machine: Vast.ai: vastai_kaalia may run any command as "
                              f"root without a password: `{VAST_RULE_SHOWN}` (/etc/sudoers:31)")


def test_a_partly_read_sudoers_says_what_was_not_read() -> None:
    outcome = run_check(REGISTRY["AGT-1010"], facts(vast(groups=[]), sudo=PARTLY_READ), None)
    assert outcome.status == "unknown" and GAP in outcome.detail


def test_a_conflict_names_both_platforms_and_what_breaks() -> None:
    ionet = run_check(REGISTRY["AGT-1030"], facts(vast()), "ionet")
    assert ionet.detail.startswith("conflict: Vast.ai is installed (account vastai_kaalia, unit vastai.service): "
                                   "installing io.net's agent here would rewrite /etc/docker/daemon.json, which "
                                   "Vast.ai's containers run under")
    assert "(source ionet-setup; `hostcheck explain vast`)" in ionet.detail
    salad = run_check(REGISTRY["AGT-1030"], facts(vast()), "salad")
    assert "allows no other docker or containerd" in salad.detail and "Vast.ai" in salad.detail


def test_gpus_bound_to_vfio_are_part_of_the_conflict() -> None:
    given = facts(vast(), TENSORDOCK, extra={"agents": {"kernel_params": {"vfio-pci.ids": "10de:2684,10de:22ba"}}})
    outcome = run_check(REGISTRY["AGT-1030"], given, "vast")
    assert outcome.status == "fail" and "vfio-pci.ids=10de:2684,10de:22ba" in outcome.detail


def test_a_blind_audit_says_why_io_net_cannot_be_ruled_out() -> None:
    for check_id in ("AGT-1010", "AGT-1020", "AGT-1030"):
        outcome = run_check(REGISTRY[check_id], facts(SALAD if check_id == "AGT-1020" else vast(groups=[]), containers=BLIND,
                                                   sudo=NO_RULES), "vast" if check_id == "AGT-1030" else None)
        assert outcome.status == "unknown", (check_id, outcome)
        assert "io.net's agent is recognised only by its running containers" in outcome.detail
        assert "permission denied" in outcome.detail


def test_a_missing_agents_section_is_unknown_never_a_pass() -> None:
    outcome = run_check(REGISTRY["AGT-1010"], {"meta": {}}, None)
    assert outcome.status == "unknown"


def test_conflicts_from_the_catalog_cite_a_source_each_way() -> None:
    catalog = load_catalog()
    for judged in catalog.agents:
        for installed in catalog.agents:
            found = conflicts(judged, installed)
            if judged.id == installed.id:
                assert found == []
                continue
            # every pair of today's agents conflicts, whichever is installed first
            assert found and conflicts(installed, judged), (judged.id, installed.id)
            assert all(c.source in catalog.sources for c in found)


# ------------------------------------------------------------------ the report's words


def with_agent(name: str, *agents: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(load_snapshot(SNAPSHOTS / f"{name}.json"))
    data["agents"] = {"installed": list(agents), "sudoers": UNRESTRICTED, "update_units": {},
                      "sudo_activity": Unknown("not root")}
    return data


def test_dedicated_machine_with_vast_agent_is_medium_and_says_the_platform_has_root() -> None:
    report = build_report(with_agent("dedicated-4090", vast()), resolve_policies(["vast"]))
    risk = report.owner_risk
    high_or_medium = {r.id for r in risk.findings if r.status == "warn"}
    assert risk.rating == "medium" and {"AGT-1010", "AGT-1020"} <= high_or_medium
    assert report.headline.endswith(
        "owner risk MEDIUM (installing the provider agent hands the platform root on this machine; "
        "the agent fetches and runs code from its platform as root).")
    assert risk.statement.startswith("MEDIUM because of: installing the provider agent hands the platform root")
    assert f"`{VAST_RULE_SHOWN}` (/etc/sudoers:31)" in risk.statement


def test_personal_machine_with_vast_agent_is_high_and_names_the_agent_first_class() -> None:
    report = build_report(with_agent("reference-laptop", vast()), resolve_policies(["vast"]))
    risk = report.owner_risk
    assert risk.rating == "high"
    assert "installing the provider agent hands the platform root on this personal machine" in report.headline
    assert "vastai_kaalia may run any command as root without a password" in risk.statement


def test_the_owner_risk_statement_names_the_items_that_are_high() -> None:
    """Two machines rated HIGH for different reasons get different statements, each naming its own items."""
    laptop = build_report(load_snapshot(SNAPSHOTS / "reference-laptop.json"), resolve_policies(["vast"])).owner_risk
    high = [r for r in laptop.findings if r.status == "warn" and r.level == "high"]
    assert high
    for row in high:
        assert row.note in laptop.statement
    agent = build_report(with_agent("ubuntu-desktop-dedicated", vast()), resolve_policies(["vast"])).owner_risk
    assert agent.statement != laptop.statement


def test_the_headline_does_not_recommend_a_platform_whose_agent_would_break_the_installed_one() -> None:
    """Vast's agent is installed: io.net's setup would rewrite daemon.json under it, a blocker
    in io.net's policy (its setup script is the source), so io.net is not feasible and the
    headline offers only Vast."""
    report = build_report(with_agent("dedicated-4090", vast()), resolve_policies(["ionet", "vast"]))
    ionet = next(p for p in report.policies if p.id == "ionet")
    finding = next(f for f in ionet.findings if f.id == "AGT-1030")
    assert (ionet.verdict, finding.status, finding.severity) == ("not feasible", "fail", "blocker")
    assert "installing io.net's agent here would rewrite /etc/docker/daemon.json, which Vast.ai's containers run under" \
        in finding.detail
    vast_policy = next(p for p in report.policies if p.id == "vast")
    assert next(f for f in vast_policy.findings if f.id == "AGT-1030").status == "pass"
    assert report.headline.startswith("Yes, you can host this machine on vast (feasible with risks);")
    assert "ionet" not in report.headline


def test_the_agents_root_is_never_left_to_more_below() -> None:
    """The statement names at most four items; the agent's root rows are always among them,
    the other items of the rating share the room left, in the policy's order."""
    from hostcheck.models import Level, OwnerRiskFinding, Rating, Status
    from hostcheck.scoring import MAX_NAMED, owner_risk, statement

    source = owner_risk(load_snapshot(SNAPSHOTS / "reference-laptop.json")).findings[0].source

    def row(check_id: str, level: Level = Level.HIGH) -> OwnerRiskFinding:
        return OwnerRiskFinding(id=check_id, title=check_id, note=f"note {check_id}", level=level, status=Status.WARN,
                                measured=1, detail="", fix="", fix_role="", source=source)

    # five high items before the agent's, in the owner-risk policy's order
    others = [row(c) for c in ("OWN-1010", "ISO-1010", "DOC-1070", "ISO-1040", "ISO-1050")]
    agent = [row("OWN-1050"), row("AGT-1020", Level.MEDIUM)]
    text = statement(Rating.HIGH, [*others, *agent], "general.")
    room = MAX_NAMED - len(agent)
    named = [r.note for r in others[:room]] + [r.note for r in agent]
    assert text == f"HIGH because of: {'; '.join(named)}; and {len(others) - room} more below. general."


# ------------------------------------------------------------------ explain and the catalog


def test_explain_vast_gives_what_it_takes_with_sources_and_dates() -> None:
    proc = run_cli("explain", "vast")
    assert proc.returncode == 0, proc.stderr
    assert "vastai_kaalia ALL=(ALL) NOPASSWD:ALL" in proc.stdout
    catalog = load_catalog()
    flat = "".join(proc.stdout.split())  # lines wrap at the terminal's width (a long URL too)
    for take in catalog.get("vast").takes:  # type: ignore[union-attr]
        source = catalog.sources[take.source]
        for said in (take.what, source.url, f"checked {source.checked}"):
            assert "".join(said.split()) in flat, said


def test_explain_agents_covers_every_platform() -> None:
    proc = run_cli("explain", "agents")
    assert proc.returncode == 0, proc.stderr
    for platform in ("Vast.ai", "Salad (Linux beta)", "io.net", "TensorDock"):
        assert f"{platform} host agent" in proc.stdout


def test_catalog_refuses_a_claim_without_a_source() -> None:
    raw = load_catalog().model_dump(mode="json", exclude_none=True)
    raw["agents"][0]["takes"][0]["source"] = "nowhere"
    with pytest.raises(ValueError, match="unknown source key"):
        Catalog.model_validate(raw)


REAL_INCLUDES = [c for c in INCLUDES if c[3] == DIR or c[0] == "relative from a drop-in"]


@pytest.mark.root
@real_sudo
@pytest.mark.parametrize(("case", "main", "files", "dirs", "read"), REAL_INCLUDES, ids=[c[0] for c in REAL_INCLUDES])
def test_the_real_sudo_follows_the_same_includes(tmp_path: Path, case: str, main: str, files: dict[str, str],
                                                 dirs: dict[str, list[str]], read: list[str]) -> None:
    dropins = {path.rsplit("/", 1)[1]: text for path, text in files.items()}
    assert _real_sudo(tmp_path, main, ["*"], dropins) == {"*": True}


@pytest.mark.root
@real_sudo
@pytest.mark.parametrize(("main", "unrestricted"), [
    ("tensordock ALL=(ALL) NOPASSWD:ALL\n@includedir /etc/sudoers.d", False),
    ("@includedir /etc/sudoers.d\ntensordock ALL=(ALL) NOPASSWD:ALL", True),
])
def test_the_real_sudo_reads_an_include_at_its_place(tmp_path: Path, main: str, unrestricted: bool) -> None:
    dropin = {"deny": "tensordock ALL=(ALL) !ALL\n"}
    assert _real_sudo(tmp_path, main, ["*"], dropin) == {"*": unrestricted}
    ours = view({"/etc/sudoers": main + "\n", "/etc/sudoers.d/deny": dropin["deny"]}, dirs={"/etc/sudoers.d": ["deny"]})
    assert (ours["scope"] == "unrestricted") is unrestricted


# `systemctl show -p Id,LoadState,UnitFileState,ActiveState,SubState,Result,NRestarts` prints
# the properties in systemd's own order, one block per unit, blocks apart by a blank line. This
# is systemd 252's answer for a unit whose ExecStart exits 1 under Restart=always, between two
# restarts, and for a unit that is not installed.
RESTART_LOOP_SHOW = """NRestarts=7
Result=exit-code
Id=vastai.service
LoadState=loaded
ActiveState=activating
SubState=auto-restart
UnitFileState=enabled

NRestarts=0
Result=success
Id=vast_metrics.service
LoadState=not-found
ActiveState=inactive
SubState=dead
UnitFileState=
"""
LOOP_THRESHOLD = 3  # the Vast policies' AGT-1070 line


def shown_unit(text: str, unit: str = "vastai.service") -> dict[str, Any]:
    return unit_state(unit, parse_unit_show(text).get(unit, {}))


def test_a_restart_looping_unit_is_read_from_systemctl_show() -> None:
    looping = shown_unit(RESTART_LOOP_SHOW)
    assert looping == {"name": "vastai.service", "present": True, "enabled": "enabled", "active": False,
                       "active_state": "activating", "sub_state": "auto-restart", "result": "exit-code",
                       "restarts": 7}
    absent = shown_unit(RESTART_LOOP_SHOW, "vast_metrics.service")
    assert absent["present"] is False and absent["restarts"] == 0


@pytest.mark.parametrize("value", ["", "-1", "1e9", "0x10", "12345678901234567890", "７", "²", "3 4", "nan"])
def test_a_restart_count_that_is_not_a_count_is_unknown_with_the_reason(value: str) -> None:
    text = RESTART_LOOP_SHOW.replace("NRestarts=7", f"NRestarts={value}" if value else "", 1)
    got = shown_unit(text)["restarts"]
    assert isinstance(got, Unknown) and "NRestarts" in got.reason


def test_state_words_that_are_not_systemds_are_not_passed_on() -> None:
    text = RESTART_LOOP_SHOW.replace("SubState=auto-restart", "SubState=\x1b[31mred" + "x" * 300, 1)
    assert isinstance(shown_unit(text)["sub_state"], Unknown)


def vast_units(*units: dict[str, Any] | Unknown) -> dict[str, Any]:
    entry = vast()
    entry["units"] = units[0] if len(units) == 1 and isinstance(units[0], Unknown) else list(units)
    return entry


@pytest.mark.parametrize("restarts", [0, LOOP_THRESHOLD - 1, LOOP_THRESHOLD, 10**9 - 1])
def test_the_restart_count_is_judged_against_the_policy_line(restarts: int) -> None:
    text = RESTART_LOOP_SHOW.replace("NRestarts=7", f"NRestarts={restarts}", 1)
    outcome = run_check(REGISTRY["AGT-1070"], facts(vast_units(shown_unit(text))), LOOP_THRESHOLD)
    assert outcome.measured == restarts
    if restarts >= LOOP_THRESHOLD:
        assert outcome.status == "fail"
        assert outcome.detail == f"vastai.service restarted {restarts} times (activating/auto-restart/exit-code)"
    else:
        assert outcome.status == "pass"


def test_a_restart_count_systemd_could_not_give_is_unknown_never_a_pass() -> None:
    no_count = shown_unit(RESTART_LOOP_SHOW.replace("NRestarts=7", "NRestarts=lots", 1))
    outcome = run_check(REGISTRY["AGT-1070"], facts(vast_units(no_count)), LOOP_THRESHOLD)
    assert outcome.status == "unknown" and "'lots' is not a count" in outcome.detail
    blind = run_check(REGISTRY["AGT-1070"], facts(vast_units(Unknown("cannot ask systemd about units: timed out"))),
                      LOOP_THRESHOLD)
    assert blind.status == "unknown" and "timed out" in blind.detail
    # A unit recorded before the restart count was collected (an older snapshot).
    old = run_check(REGISTRY["AGT-1070"], facts(vast()), LOOP_THRESHOLD)
    assert old.status == "unknown" and old.detail == "vastai.service: restart count not collected"


def test_no_agent_or_no_agent_service_passes_as_the_other_agent_checks_do() -> None:
    assert run_check(REGISTRY["AGT-1070"], facts(), LOOP_THRESHOLD).detail == "no provider agent installed"
    assert run_check(REGISTRY["AGT-1010"], facts(), None).detail == "no provider agent installed"
    salad = run_check(REGISTRY["AGT-1070"], facts(SALAD), LOOP_THRESHOLD)
    assert salad.status == "pass" and salad.detail == "no installed agent runs a systemd service"

def test_saved_facts_are_rejudged_with_todays_sudo_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agents collector keeps the sudoers it read, not a verdict: a saved facts file is
    judged by the sudo rules of the hostcheck that reads it. Here a newer hostcheck counts ss
    among the commands that give a root shell."""
    data = with_agent("dedicated-4090", vast(groups=[]))
    data["agents"]["sudoers"] = NOT_GIVING
    saved = tmp_path / "facts.json"
    saved.write_text(json.dumps(to_jsonable(data)), encoding="utf-8")
    assert "root_giving" not in saved.read_text()  # no verdict is frozen into the facts
    before = run_check(REGISTRY["AGT-1010"], load_snapshot(saved), None)
    assert (before.status, before.measured) == ("pass", 0), before.detail
    today = matching.root_giving
    monkeypatch.setattr(matching, "root_giving", lambda command: today(command) or command.startswith("/usr/bin/ss "))
    after = run_check(REGISTRY["AGT-1010"], load_snapshot(saved), None)
    assert (after.status, after.measured) == ("fail", 1), after.detail
    assert "`/usr/bin/ss *`" in after.detail
