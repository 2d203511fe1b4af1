"""Who may run what as whom: sudo's matching of the loaded rules for one account on this host
(match.c), the scope of what it grants, the commands that give root, and whether they are logged."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from hostcheck.knowledge.sudoers.grammar import MAX_LIST, MYSELF, CmndSpec, DefaultsEntry, Member, Runas, UserSpec
from hostcheck.knowledge.sudoers.includes import MAX_GAPS, Loaded

MAX_ALIAS_DEPTH = 32
# Groups whose members have root by another name: the Docker daemon's socket (Docker docs,
# "Docker security": the docker group grants root-level privileges), raw block devices (Debian
# wiki, SystemGroups: disk is "mostly equivalent to root access"), the LXD daemon (LXD docs,
# security: access to it is root access). A rule that lets the account run a command with
# one of these groups, even as itself (``(:docker)``), gives root through that command.
ROOT_EQUIVALENT_GROUPS = ("docker", "disk", "lxd")
_META = re.compile(r"[*?\[]")

# Programs that hand out root when allowed with arguments the caller picks (an inference from
# what each program can do, labelled as such in the findings): a shell, an interpreter, a
# program that runs another program, writes any file, or changes accounts or the engine.
ROOT_GIVING_NAMES = (
    "sh", "bash", "dash", "zsh", "su", "sudo", "sudoedit", "env", "python", "python3", "perl",
    "systemd-run", "systemctl", "docker", "virsh", "cp", "mv", "tee", "dd", "chmod", "chown",
    "install", "usermod", "useradd", "passwd", "visudo", "sed", "apt", "apt-get", "dpkg", "find",
    "vi", "vim", "nano", "less", "journalctl", "timeout", "nsenter", "chroot", "mount", "crontab",
    "rsync", "tar",
)
ROOT_GIVING = re.compile(
    r"(^|/)(" + "|".join(re.escape(n) for n in ROOT_GIVING_NAMES if n != "python") + r"|python[0-9.]*)$")



@dataclass
class Account:
    name: str
    groups: frozenset[str]
    uid: int | None = None
    gids: frozenset[int] = frozenset()


class _Matcher:
    """sudo's matching for one account on this host (match.c): lists from their end, the
    first entry that says yes or no decides; aliases recurse."""

    def __init__(self, loaded: Loaded, account: Account, runas_default: str) -> None:
        self.aliases = loaded.aliases
        self.account = account
        self.host = (loaded.hostname or "").lower()
        self.runas_default = runas_default
        self.unresolved: set[str] = set()

    def _walk(self, members: Iterable[Member], one: Callable[[str, int], bool | None], depth: int) -> bool | None:
        for member in reversed(list(members)):
            result = one(member.name, depth)
            if result is not None:
                return (not result) if member.negated else result
        return None

    def _alias(self, kind: str, name: str, one: Callable[[str, int], bool | None], depth: int) -> tuple[bool, bool | None]:
        members = self.aliases.get((kind, name))
        if members is None or depth >= MAX_ALIAS_DEPTH:
            return False, None
        return True, self._walk(members, one, depth + 1)

    def user(self, members: Iterable[Member], depth: int = 0) -> bool | None:
        return self._walk(members, self._user_one, depth)

    def _user_one(self, name: str, depth: int) -> bool | None:
        if name == "ALL":
            return True
        found, result = self._alias("User_Alias", name, self._user_one, depth)
        if found:
            return result
        account = self.account
        if name.startswith("%"):
            group = name[1:]
            if group.startswith(":"):
                self.unresolved.add(name)  # a non-Unix group (sudo's group plugin)
                return None
            if group.startswith("#"):
                return True if group[1:].isdigit() and int(group[1:]) in account.gids else None
            return True if group in account.groups else None
        if name.startswith("+"):
            self.unresolved.add(name)  # a netgroup: not resolved here
            return None
        if name.startswith("#") and name[1:].isdigit():
            return True if account.uid is not None and int(name[1:]) == account.uid else None
        return True if name == account.name else None

    def host_list(self, members: Iterable[Member], depth: int = 0) -> bool | None:
        return self._walk(members, self._host_one, depth)

    def _host_one(self, name: str, depth: int) -> bool | None:
        if name == "ALL":
            return True
        found, result = self._alias("Host_Alias", name, self._host_one, depth)
        if found:
            return result
        if not self.host or name.startswith("+") or re.match(r"^[0-9a-fA-F.:/]+$", name) and any(c in name for c in ".:"):
            # The host name is not known, or the entry is a netgroup or an address: assume the
            # rule is for this host (it may give root; reporting it errs on the side of caution).
            return True
        short = self.host.split(".", 1)[0]
        target = self.host if "." in name else short
        pattern = name.lower()
        return True if (fnmatchcase(target, pattern) if _META.search(pattern) else target == pattern) else None

    def runas_root(self, runas: Runas | None) -> bool:
        """Whether the command may run as root (uid 0), or with a group that gives root."""
        users = runas.users if runas is not None else (Member(self.runas_default),)
        if self._walk(users, self._runas_one, 0) is True:
            return True
        return runas is not None and runas.groups is not None and self._walk(runas.groups, self._group_one, 0) is True

    def _group_one(self, name: str, depth: int) -> bool | None:
        if name == "ALL":
            return True
        found, result = self._alias("Runas_Alias", name, self._group_one, depth)
        if found:
            return result
        return True if name in ROOT_EQUIVALENT_GROUPS else None

    def _runas_one(self, name: str, depth: int) -> bool | None:
        if name == "ALL":
            return True
        found, result = self._alias("Runas_Alias", name, self._runas_one, depth)
        if found:
            return result
        if name == MYSELF:
            return True if self.account.name == "root" else None
        return True if name in ("root", "#0", "%root", "%#0") else None

    def any_command(self, member: Member, depth: int = 0) -> bool | None:
        """Whether the entry matches a command it does not name (any program at all): ALL
        does, a Cmnd_Alias does when it resolves to ALL."""
        result: bool | None
        if member.name == "ALL":
            result = True
        else:
            found, result = self._alias("Cmnd_Alias", member.name,
                                        lambda n, d: self.any_command(Member(n), d), depth)
            if not found:
                return None
        if result is None:
            return None
        return (not result) if member.negated else result

    def commands(self, member: Member, negated: bool = False, depth: int = 0) -> list[tuple[str, bool]]:
        """The commands an entry names, aliases expanded, each with whether it is denied."""
        negated = negated != member.negated
        members = self.aliases.get(("Cmnd_Alias", member.name))
        if members is None or depth >= MAX_ALIAS_DEPTH:
            return [(member.name, negated)]
        out: list[tuple[str, bool]] = []
        for inner in members:
            out.extend(self.commands(inner, negated, depth + 1))
            if len(out) > MAX_LIST * 4:
                break
        return out

    def cmnd_list_all(self, members: Iterable[Member]) -> bool:
        """A Defaults!list that covers every command."""
        return self._walk(members, lambda n, d: self.any_command(Member(n), d), 0) is True


def root_giving(command: str) -> bool:
    """True when the allowed command can be turned into a root shell (an inference: a shell,
    an interpreter, a program that runs or writes anything, with arguments the caller
    chooses). A wildcard or a directory in the program's path counts when it can reach such a
    program (``/usr/bin/*``, ``/usr/bin/n*`` reaches nano and nsenter, ``/usr/bin/``)."""
    words = command.split()
    if not words:
        return False
    program = words[0]
    if program == "ALL":
        return True
    if program == "list":
        return False
    if program.endswith("/"):
        return True  # a directory: every program in it
    if _META.search(program):
        folder, _, base = program.rpartition("/")
        if _META.search(folder):
            return True
        return any(fnmatchcase(name, base) for name in ROOT_GIVING_NAMES + ("python3.11", "python3.12"))
    return bool(ROOT_GIVING.search(program))


def _denies(pattern: str, command: str) -> bool:
    """Whether a denied entry covers an allowed one: the same text, or a wildcard over it."""
    if pattern == command:
        return True
    deny, allow = pattern.split(), command.split()
    if not deny or not allow or not _META.search(deny[0]):
        return False
    if not fnmatchcase(allow[0], deny[0]):
        return False
    return len(deny) == 1 or fnmatchcase(" ".join(allow[1:]), " ".join(deny[1:]))


def _flags(settings: Iterable[str]) -> dict[str, Any]:
    """Last word wins, as in sudo: 'log_output' on, '!log_output' off, 'syslog=authpriv' on."""
    flags: dict[str, Any] = {}
    for setting in settings:
        name, eq, value = setting.partition("=")
        name = name.strip().rstrip("+-").strip()
        negated = name.startswith("!")
        name = name.lstrip("!").strip()
        value = value.strip().strip('"')
        if name in ("log_output", "log_input", "syslog", "logfile"):
            flags[name] = not negated and (value.lower() not in ("false", "0") if eq else True)
        elif name == "runas_default" and value and not negated:
            flags[name] = value
    return flags


def _may_name(text: str, account: Account, aliases: Iterable[str]) -> bool:
    """Whether a line not understood might grant the account something: a rule whose users
    (before the first '=') name it, a group of it, ALL, a user alias, a netgroup or a uid, or a
    user or run-as alias definition that names it."""
    head = text.split(None, 1)[0] if text.split() else ""
    if head in ("Cmnd_Alias", "Cmd_Alias", "Host_Alias") or head.startswith(("Defaults", "#", "@")):
        return False
    part = text if head in ("User_Alias", "Runas_Alias") else text.split("=", 1)[0]
    words = set(re.findall(r"[^\s,=:()!]+", part))
    names = {account.name, "ALL", *(f"%{g}" for g in account.groups), *aliases}
    if account.uid is not None:
        names.add(f"#{account.uid}")
    return bool(words & names) or any(w.startswith(("+", "%:", "%#")) for w in words)


def account_view(loaded: Loaded, account: str, groups: set[str] | frozenset[str], uid: int | None = None,
                 gids: Iterable[int] = ()) -> dict[str, Any]:
    """What sudo grants ``account`` (a member of ``groups``): the rules, their scope, and
    whether its commands are logged. The shape of ``agents.installed.*.accounts.*.sudo``."""
    who = Account(account, frozenset(groups), uid, frozenset(gids))
    global_flags = _flags(s for e in loaded.entries if isinstance(e, DefaultsEntry) and e.binding == ""
                          for s in e.settings)
    match = _Matcher(loaded, who, str(global_flags.get("runas_default", "root")))

    # Defaults in sudo's order of application: global, host, user, run-as, command; the last
    # value of a setting wins.
    settings: list[str] = []
    for binding in ("", "@", ":", ">", "!"):
        for entry in loaded.entries:
            if not isinstance(entry, DefaultsEntry) or entry.binding != binding:
                continue
            applies = {
                "": lambda e: True,
                "@": lambda e: match.host_list(e.members) is True,
                ":": lambda e: match.user(e.members) is True,
                ">": lambda e: match._walk(e.members, match._runas_one, 0) is True,
                "!": lambda e: match.cmnd_list_all(e.members),
            }[binding](entry)
            if applies:
                settings.extend(entry.settings)
    flags = _flags(settings)
    default_logged = bool(flags.get("log_output", False) or flags.get("log_input", False))

    shown: list[UserSpec] = []
    applicable: list[CmndSpec] = []
    for entry in loaded.entries:
        if not isinstance(entry, UserSpec) or match.user(entry.users) is not True:
            continue
        specs = [s for p in entry.privileges if match.host_list(p.hosts) is True for s in p.specs]
        if specs:
            shown.append(entry)
            applicable.extend(specs)

    # The last rule that decides for a command the rules do not name (any program) is the
    # account's answer for "anything as root".
    decision: bool | None = None
    allowed: list[str] = []
    as_root: list[CmndSpec] = []
    for spec in applicable:
        if not match.runas_root(spec.runas):
            continue
        as_root.append(spec)
        anything = match.any_command(spec.command)
        if anything is not None:
            decision = anything
        for command, denied in match.commands(spec.command):
            if command == "ALL":
                if denied:
                    allowed.clear()
                continue
            if denied:
                allowed = [c for c in allowed if not _denies(command, c)]
            elif command not in allowed:
                allowed.append(command)
    giving = sorted({c for c in allowed if root_giving(c)})

    granting = [s for s in as_root if not s.command.negated]
    if granting:
        io_logging = all(
            (s.log_input if s.log_input is not None else bool(flags.get("log_input", False)))
            or (s.log_output if s.log_output is not None else bool(flags.get("log_output", False)))
            for s in granting)
    else:
        io_logging = default_logged

    gaps = list(loaded.gaps)
    alias_names = [name for (kind, name) in loaded.aliases if kind == "User_Alias"]
    for line in loaded.unparsed:
        if _may_name(line.text, who, alias_names):
            gaps.append(f"{line.file}:{line.line} not understood and may name {account}: {line.text[:120]}")
    if match.unresolved:
        gaps.append(f"rules name {', '.join(sorted(match.unresolved)[:4])} (netgroups or non-Unix groups), "
                    f"which are not resolved here")
    if decision is True:
        scope = "unrestricted"
    elif gaps:
        scope = "unknown"
    else:
        scope = "restricted" if shown else "none"
    return {
        "scope": scope,
        "rules": [{
            "file": rule.file,
            "line": rule.line,
            "rule": rule.text[:400],
            "nopasswd": any(s.nopasswd for p in rule.privileges for s in p.specs),
            "commands": sum(len(p.specs) for p in rule.privileges),
        } for rule in shown[:32]],
        "root_giving": giving[:32],
        "io_logging": io_logging,
        "syslog": bool(flags.get("syslog", True)),
        "logfile": bool(flags.get("logfile", False)),
        "files_read": list(loaded.files),
        "unreadable": list(loaded.unreadable),
        "unparsed_lines": len(loaded.unparsed),
        "gaps": gaps[:MAX_GAPS + 1],
    }
