"""A small, bounded reader of sudoers(5): which rules and Defaults apply to one account.

Not a full sudoers grammar: enough to answer "what may this account run as root, without a
password, and is it logged?" for the agent accounts the audit looks at. Everything it does
not understand is kept as an unparsed line (counted, never guessed at). Input is treated as
hostile: each file, line and include chain is bounded, include loops are cut, and an
unreadable file makes the answer unknown rather than partial-but-confident.

Pure: reading files is the caller's job (``read`` returns the text or an ``Unknown``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hostcheck.facts import Unknown

MAX_FILE_CHARS = 256 << 10
MAX_LOGICAL_LINE = 8 << 10
MAX_FILES = 64
MAX_INCLUDE_DEPTH = 8
MAX_RULES = 512
MAX_COMMANDS_PER_RULE = 128
SUDOERS = "/etc/sudoers"

_ALIAS_KINDS = ("User_Alias", "Runas_Alias", "Host_Alias", "Cmnd_Alias", "Cmd_Alias")
_TAG = re.compile(r"^(NOPASSWD|PASSWD|NOEXEC|EXEC|SETENV|NOSETENV|LOG_INPUT|NOLOG_INPUT|LOG_OUTPUT|"
                  r"NOLOG_OUTPUT|MAIL|NOMAIL|FOLLOW|NOFOLLOW|INTERCEPT|NOINTERCEPT)\s*:\s*")
_OPTION = re.compile(r"^(ROLE|TYPE|APPARMOR_PROFILE|PRIVS|LIMITPRIVS|CWD|CHROOT|NOTBEFORE|NOTAFTER|TIMEOUT)\s*=\s*\S+\s*")
_NAME = re.compile(r"^[A-Za-z_%+#:.0-9@$\\-][^\s,=:()!]*$")

# Commands that hand out root when allowed with arguments the caller picks (an inference from
# what each program can do, labelled as such in the findings): a shell, an interpreter, a
# program that runs another program, writes any file, or changes accounts or the engine.
ROOT_GIVING = re.compile(
    r"(^|/)(sh|bash|dash|zsh|su|sudo|sudoedit|env|python[0-9.]*|perl|systemd-run|systemctl|docker|virsh|"
    r"cp|mv|tee|dd|chmod|chown|install|usermod|useradd|passwd|visudo|sed|apt|apt-get|dpkg|find|vi|vim|"
    r"nano|less|journalctl|timeout|nsenter|chroot|mount|crontab|rsync|tar)$"
)


@dataclass(frozen=True)
class Rule:
    """One user specification line, as it applies to the account asked about."""

    file: str
    line: int
    users: tuple[str, ...]
    runas: str
    nopasswd: bool
    commands: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True)
class DefaultsEntry:
    file: str
    line: int
    binding: str  # "" (global), ":users", "@hosts", ">runas", "!cmnds"
    settings: tuple[str, ...]


@dataclass
class Parsed:
    rules: list[Rule] = field(default_factory=list)
    defaults: list[DefaultsEntry] = field(default_factory=list)
    aliases: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    includes: list[tuple[str, bool]] = field(default_factory=list)  # (path, is_dir)
    unparsed: int = 0


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with backslash continuations joined and comments dropped;
    ``#include``/``#includedir`` are directives, not comments. Over-long lines are cut."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    pending_chars = 0
    start = 0
    for number, raw in enumerate(text[:MAX_FILE_CHARS].replace("\0", "").splitlines(), start=1):
        if not pending:
            start = number
        if raw.endswith("\\"):
            pending.append(raw[:-1])
            pending_chars += len(raw)  # the joining space counts: a chain of empty pieces is bounded too
            if pending_chars > MAX_LOGICAL_LINE:
                joined = " ".join(pending)[:MAX_LOGICAL_LINE].strip()
                if joined:
                    out.append((start, joined))
                pending, pending_chars = [], 0
            continue
        pending_chars = 0
        pending.append(raw)
        line = " ".join(pending)[:MAX_LOGICAL_LINE]
        pending = []
        stripped = line.strip()
        if stripped.startswith(("#include", "@include")):
            out.append((start, stripped))
            continue
        # A '#' starts a comment unless it is a uid ("#1000") in a name position: rare in agent
        # rules, so only a '#' followed by a digit right at a word start is kept.
        cut = re.search(r"(?<![\\\w])#(?!\d)", line)
        if cut:
            line = line[: cut.start()]
        if line.strip():
            out.append((start, line.strip()))
    if pending and " ".join(pending).strip():
        out.append((start, " ".join(pending)[:MAX_LOGICAL_LINE].strip()))
    return out


def _split_commas(text: str) -> list[str]:
    """Split on commas that are not escaped with a backslash."""
    parts = re.split(r"(?<!\\),", text)
    return [p.strip() for p in parts if p.strip()]


def _parse_spec(rest: str) -> list[tuple[str, bool, tuple[str, ...], tuple[str, ...]]] | None:
    """``host = (runas) TAGS: cmd, cmd : host = ...`` -> [(runas, nopasswd, tags, commands)]."""
    out = []
    for host_part in re.split(r"(?<!\\)\s:\s(?=[^=]*=)", rest):
        host, eq, cmnds = host_part.partition("=")
        if not eq or not host.strip():
            return None
        runas = "root"
        nopasswd = False
        tags: list[str] = []
        commands: list[str] = []
        for raw in _split_commas(cmnds):
            item = raw
            if item.startswith("("):
                close = item.find(")")
                if close < 0:
                    return None
                runas = item[1:close].strip() or "root"
                item = item[close + 1:].strip()
            while True:
                option = _OPTION.match(item)
                if not option:
                    break
                item = item[option.end():]
            while True:
                tag = _TAG.match(item)
                if not tag:
                    break
                tags.append(tag.group(1))
                nopasswd = tag.group(1) == "NOPASSWD" or (nopasswd and tag.group(1) != "PASSWD")
                item = item[tag.end():]
            if item and len(commands) < MAX_COMMANDS_PER_RULE:
                commands.append(item.strip())
        if not commands:
            return None
        out.append((runas, nopasswd, tuple(tags), tuple(commands)))
    return out


def parse(text: str, path: str) -> Parsed:
    """One sudoers file's rules, Defaults, aliases and include directives."""
    parsed = Parsed()
    for number, line in logical_lines(text):
        if line.startswith(("#includedir", "@includedir")):
            target = line.split(None, 1)[1].strip() if " " in line else ""
            if target:
                parsed.includes.append((target, True))
            continue
        if line.startswith(("#include", "@include")):
            target = line.split(None, 1)[1].strip() if " " in line else ""
            if target:
                parsed.includes.append((target, False))
            continue
        head = line.split(None, 1)
        if not head:
            continue
        word = head[0]
        if word.startswith("Defaults"):
            binding = word[len("Defaults"):]
            settings = tuple(_split_commas(head[1])) if len(head) > 1 else ()
            if binding[:1] in ("", ":", "@", ">", "!"):
                parsed.defaults.append(DefaultsEntry(path, number, binding, settings))
                continue
        if word in _ALIAS_KINDS and len(head) > 1:
            kind = "Cmnd_Alias" if word == "Cmd_Alias" else word
            for definition in re.split(r"(?<!\\)\s:\s", head[1]):
                name, eq, members = definition.partition("=")
                if eq and name.strip():
                    parsed.aliases[(kind, name.strip())] = tuple(_split_commas(members))
            continue
        if len(head) < 2 or len(parsed.rules) >= MAX_RULES:
            parsed.unparsed += 1
            continue
        users = tuple(_split_commas(word))
        if not users or not all(_NAME.match(u.lstrip("!")) for u in users):
            parsed.unparsed += 1
            continue
        specs = _parse_spec(head[1])
        if specs is None:
            parsed.unparsed += 1
            continue
        for runas, nopasswd, tags, commands in specs:
            parsed.rules.append(Rule(path, number, users, runas, nopasswd, commands, tags))
    return parsed


def _include_dir_files(names: list[str]) -> list[str]:
    """sudo's own rule: skip names that end in '~' or contain a '.', in lexical order."""
    return sorted(n for n in names if not n.endswith("~") and "." not in n)


@dataclass
class Loaded:
    parsed: Parsed
    files: list[str]
    unreadable: list[str]


def load(read: Callable[[str], str | Unknown], listdir: Callable[[str], list[str] | Unknown],
         root: str = SUDOERS) -> Loaded | Unknown:
    """Read ``root`` and what it includes, bounded; Unknown when ``root`` itself is unreadable."""
    merged = Parsed()
    files: list[str] = []
    unreadable: list[str] = []
    seen: set[str] = set()

    def visit(path: str, depth: int) -> Unknown | None:
        if path in seen or len(files) >= MAX_FILES or depth > MAX_INCLUDE_DEPTH:
            return None
        seen.add(path)
        text = read(path)
        if isinstance(text, Unknown):
            unreadable.append(path)
            return text
        files.append(path)
        part = parse(text, path)
        merged.rules.extend(part.rules[: MAX_RULES - len(merged.rules)])
        merged.defaults.extend(part.defaults)
        merged.aliases.update(part.aliases)
        merged.unparsed += part.unparsed
        for target, is_dir in part.includes:
            if not target.startswith("/"):
                continue  # relative includes resolve against the including file: not followed
            if is_dir:
                names = listdir(target)
                if isinstance(names, Unknown):
                    unreadable.append(target)
                    continue
                for name in _include_dir_files(names):
                    visit(f"{target.rstrip('/')}/{name}", depth + 1)
            else:
                visit(target, depth + 1)
        return None

    failure = visit(root, 0)
    if failure is not None:
        return failure
    return Loaded(merged, files, unreadable)


def _expand(aliases: dict[tuple[str, str], tuple[str, ...]], kind: str, items: tuple[str, ...]) -> set[str]:
    out: set[str] = set()
    stack = list(items)
    steps = 0
    while stack and steps < 4096:
        steps += 1
        item = stack.pop().strip()
        bare = item.lstrip("!")
        members = aliases.get((kind, bare))
        if members is not None and not item.startswith("!"):
            stack.extend(members)
        else:
            out.add(item)
    return out


def applies_to(users: tuple[str, ...], account: str, groups: set[str],
               aliases: dict[tuple[str, str], tuple[str, ...]]) -> bool:
    """Whether a user list names the account (by name, a group it is in, ALL or an alias).
    A negated entry ('!name') that matches excludes it."""
    names = _expand(aliases, "User_Alias", users)
    negated = {n[1:] for n in names if n.startswith("!")}

    def hit(n: str) -> bool:
        return n == "ALL" or n == account or (n.startswith("%") and n[1:] in groups)

    if any(hit(n) for n in negated):
        return False
    return any(hit(n) for n in names if not n.startswith("!"))


def root_giving(command: str) -> bool:
    """True when the allowed command can be turned into a root shell (an inference: a shell,
    an interpreter, a program that runs or writes anything, with arguments the caller chooses)."""
    words = command.split()
    if not words:
        return False
    program = words[0]
    if program == "ALL":
        return True
    if ROOT_GIVING.search(program):
        return True
    return False


def account_view(loaded: Loaded, account: str, groups: set[str]) -> dict[str, Any]:
    """What sudo grants ``account`` (a member of ``groups``): the rules, their scope, and the
    Defaults that log its commands. The shape of ``agents.installed.*.sudo``."""
    parsed = loaded.parsed
    rules = [r for r in parsed.rules if applies_to(r.users, account, groups, parsed.aliases)]
    shown = []
    unrestricted = False
    giving: list[str] = []
    for rule in rules:
        commands = sorted(_expand(parsed.aliases, "Cmnd_Alias", rule.commands))
        targets = {part.split(":")[0].strip() for part in rule.runas.split(",")}
        runas_root = bool(targets & {"ALL", "root"})
        if "ALL" in commands and runas_root:
            unrestricted = True
        giving.extend(c for c in commands if c != "ALL" and root_giving(c))
        shown.append({
            "file": rule.file,
            "line": rule.line,
            "rule": f"{','.join(rule.users)} ALL=({rule.runas}) {'NOPASSWD: ' if rule.nopasswd else ''}{', '.join(commands)}"[:400],
            "nopasswd": rule.nopasswd,
            "commands": len(commands),
        })
    settings: list[str] = []
    for entry in parsed.defaults:
        if entry.binding == "" or (entry.binding.startswith(":") and applies_to(
                tuple(_split_commas(entry.binding[1:])), account, groups, parsed.aliases)):
            settings.extend(entry.settings)
    flags = _flags(settings)
    scope = "unrestricted" if unrestricted else "restricted" if rules else "none"
    return {
        "scope": scope,
        "rules": shown,
        "root_giving": sorted(set(giving))[:32],
        "io_logging": flags.get("log_output", False) or flags.get("log_input", False),
        "syslog": flags.get("syslog", True),
        "logfile": flags.get("logfile", False),
        "files_read": list(loaded.files),
        "unreadable": list(loaded.unreadable),
        "unparsed_lines": parsed.unparsed,
    }


def _flags(settings: list[str]) -> dict[str, bool]:
    """Last word wins, as in sudo: 'log_output' on, '!log_output' off, 'syslog=authpriv' on."""
    flags: dict[str, bool] = {}
    for setting in settings:
        name, _, value = setting.partition("=")
        name = name.strip()
        negated = name.startswith("!")
        name = name.lstrip("!").strip()
        if name in ("log_output", "log_input", "syslog", "logfile"):
            flags[name] = not negated and (value.strip().lower() not in ("false", "0") if value else True)
    return flags
