"""The sudoers(5) grammar: one file's text, bounded, into user specifications, aliases,
Defaults and include directives, in file order (sudo's gram.y and toke.l)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_LOGICAL_LINE = 8 << 10
MAX_COMMANDS_PER_RULE = 128
MAX_LIST = 256

MYSELF = ""  # a Runas_Spec with no user list: only as the invoking user
_ALIAS_KINDS = {"User_Alias": "User_Alias", "Runas_Alias": "Runas_Alias", "Host_Alias": "Host_Alias",
                "Cmnd_Alias": "Cmnd_Alias", "Cmd_Alias": "Cmnd_Alias"}
# Tags that change what this reader reports; the others are accepted and carry nothing here.
_TAGS: dict[str, tuple[str, bool] | None] = {
    "NOPASSWD": ("nopasswd", True), "PASSWD": ("nopasswd", False),
    "LOG_INPUT": ("log_input", True), "NOLOG_INPUT": ("log_input", False),
    "LOG_OUTPUT": ("log_output", True), "NOLOG_OUTPUT": ("log_output", False),
    **{tag: None for tag in ("NOEXEC", "EXEC", "SETENV", "NOSETENV", "MAIL", "NOMAIL", "FOLLOW",
                             "NOFOLLOW", "INTERCEPT", "NOINTERCEPT")},
}
_OPTIONS = frozenset({"ROLE", "TYPE", "APPARMOR_PROFILE", "PRIVS", "LIMITPRIVS", "CWD", "CHROOT",
                      "NOTBEFORE", "NOTAFTER", "TIMEOUT"})
_DIGESTS = frozenset({"sha224", "sha256", "sha384", "sha512"})
_ALIAS_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_NAME_STOPS = "!=:,()>"
_BLANK = " \t"
_INCLUDE = re.compile(r"^(?:#include(dir)?|[ \t]*@include(dir)?)[ \t]+(\S.*)$")


@dataclass(frozen=True)
class Member:
    """One entry of a list: a name (or a command with its arguments), possibly negated."""

    name: str
    negated: bool = False


@dataclass(frozen=True)
class Runas:
    users: tuple[Member, ...]  # (Member(MYSELF),) when only the invoking user
    groups: tuple[Member, ...] | None
    text: str  # as written, "(ALL:ALL)"


@dataclass(frozen=True)
class CmndSpec:
    """One command of a rule with the Runas_Spec and tags in force for it (given, or carried
    from the spec before it in the same rule)."""

    runas: Runas | None  # None: no Runas_Spec given, so sudo's runas_default (root)
    nopasswd: bool | None
    log_input: bool | None
    log_output: bool | None
    command: Member  # "ALL", a Cmnd_Alias, "sudoedit ...", or "/path args"
    shown: str


@dataclass(frozen=True)
class Privilege:
    hosts: tuple[Member, ...]
    specs: tuple[CmndSpec, ...]


@dataclass(frozen=True)
class UserSpec:
    """One user specification line."""

    file: str
    line: int
    users: tuple[Member, ...]
    privileges: tuple[Privilege, ...]

    @property
    def text(self) -> str:
        parts = [f"{_list_text(p.hosts)}=" + ", ".join(s.shown for s in p.specs) for p in self.privileges]
        return f"{_list_text(self.users)} " + " : ".join(parts)


@dataclass(frozen=True)
class DefaultsEntry:
    file: str
    line: int
    binding: str  # "" (global), "@" hosts, ":" users, ">" run-as users, "!" commands
    members: tuple[Member, ...]
    settings: tuple[str, ...]


@dataclass(frozen=True)
class Include:
    line: int
    target: str  # as written, quotes and escapes included
    is_dir: bool


@dataclass(frozen=True)
class Unparsed:
    file: str
    line: int
    text: str


Entry = UserSpec | DefaultsEntry | Include


@dataclass
class Parsed:
    entries: list[Entry] = field(default_factory=list)
    aliases: dict[tuple[str, str], tuple[Member, ...]] = field(default_factory=dict)
    unparsed: list[Unparsed] = field(default_factory=list)


def _list_text(members: Iterable[Member]) -> str:
    return ",".join(("!" if m.negated else "") + m.name for m in members)


# ------------------------------------------------------------------ lines


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with backslash continuations joined and comments dropped;
    ``#include``/``#includedir`` at the start of a line and ``@include``/``@includedir`` are
    directives, not comments. Over-long lines are cut (and then usually not understood)."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    pending_chars = 0
    start = 0
    for number, raw in enumerate(text.replace("\0", "").splitlines(), start=1):
        if not pending:
            start = number
            if _INCLUDE.match(raw):
                out.append((number, raw.strip()[:MAX_LOGICAL_LINE]))
                continue
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
        # A '#' starts a comment unless it is a uid or gid ("#1000", "%#27") in a name position.
        cut = re.search(r"(?<![\\\w%])#(?!\d)", line)
        if cut:
            line = line[: cut.start()]
        if line.strip():
            out.append((start, line.strip()))
    if pending and " ".join(pending).strip():
        out.append((start, " ".join(pending)[:MAX_LOGICAL_LINE].strip()))
    return out


class _Scan:
    """A cursor over one logical line."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def blank(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in _BLANK:
            self.i += 1

    def peek(self) -> str:
        self.blank()
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self, char: str) -> bool:
        if self.peek() == char:
            self.i += 1
            return True
        return False

    def done(self) -> bool:
        return self.peek() == ""

    def word(self, stops: str) -> str:
        """A name up to a blank or an unescaped stop character; a backslash escapes the next
        character and a double-quoted part is taken as it is (without the quotes)."""
        self.blank()
        out: list[str] = []
        s = self.s
        while self.i < len(s):
            char = s[self.i]
            if char == "\\" and self.i + 1 < len(s):
                out.append(s[self.i + 1])
                self.i += 2
                continue
            if char == '"':
                end = s.find('"', self.i + 1)
                if end < 0:
                    return ""
                out.append(s[self.i + 1:end])
                self.i = end + 1
                continue
            if char in _BLANK or char in stops:
                break
            out.append(char)
            self.i += 1
        return "".join(out)

    def command(self) -> str:
        """A command and its arguments, up to an unescaped ',' or ':' (escapes kept, blanks
        collapsed)."""
        self.blank()
        s = self.s
        begin = self.i
        while self.i < len(s):
            char = s[self.i]
            if char == "\\" and self.i + 1 < len(s):
                self.i += 2
                continue
            if char in ",:":
                break
            self.i += 1
        return " ".join(s[begin:self.i].split())


def _members(scan: _Scan) -> tuple[Member, ...] | None:
    """A comma-separated list of names, each possibly negated ('!'); blanks around commas
    are allowed, as in sudo's grammar."""
    out: list[Member] = []
    while len(out) < MAX_LIST:
        negated = False
        while scan.take("!"):
            negated = not negated
        name = scan.word(_NAME_STOPS)
        if name == "%" and scan.s[scan.i:scan.i + 1] == ":":  # %:group, a non-Unix group
            scan.i += 1
            name = "%:" + scan.word(_NAME_STOPS)
        if not name:
            return None
        out.append(Member(name, negated))
        if not scan.take(","):
            return tuple(out)
    return None


def _runas(scan: _Scan) -> Runas | None:
    """The inside of '( users : groups )', after the '('."""
    begin = scan.i - 1
    users: tuple[Member, ...] | None = None
    groups: tuple[Member, ...] | None = None
    if scan.peek() not in (":", ")"):
        users = _members(scan)
        if users is None:
            return None
    if scan.take(":") and scan.peek() != ")":
        groups = _members(scan)
        if groups is None:
            return None
    if not scan.take(")"):
        return None
    text = " ".join(scan.s[begin:scan.i].split())
    return Runas(users if users is not None else (Member(MYSELF),), groups, text)


def _command_member(scan: _Scan, shown: list[str]) -> Member | None:
    """[!...] [digest list] command: one command of a rule or of a Cmnd_Alias."""
    while True:
        save = scan.i
        word = scan.word("=:,()!")
        if word in _DIGESTS and scan.take(":"):
            digest = scan.word(",:()")
            if not digest:
                return None
            shown.append(f"{word}:{digest}")
            after = scan.i
            if scan.take(","):
                look = scan.i
                nxt = scan.word("=:,()!")
                scan.i = look
                if nxt in _DIGESTS:
                    continue
            scan.i = after
            continue
        scan.i = save
        break
    negated = False
    while scan.take("!"):
        negated = not negated
    text = scan.command()
    if not text:
        return None
    program = text.split()[0]
    if not (text == "ALL" or _ALIAS_NAME.match(text) or program.startswith("/")
            or program in ("sudoedit", "list")):
        return None
    shown.append(("!" if negated else "") + text)
    return Member(text, negated)


def _cmndspec(scan: _Scan, prev: CmndSpec | None) -> CmndSpec | None:
    runas = prev.runas if prev else None
    tags: dict[str, bool | None] = (
        {"nopasswd": prev.nopasswd, "log_input": prev.log_input, "log_output": prev.log_output} if prev
        else {"nopasswd": None, "log_input": None, "log_output": None})
    shown: list[str] = []
    if scan.take("("):
        runas = _runas(scan)
        if runas is None:
            return None
        shown.append(runas.text)
    while True:
        save = scan.i
        word = scan.word("=:,()!")
        if word in _OPTIONS and scan.take("="):
            value = scan.word(",:()")
            if not value:
                return None
            shown.append(f"{word}={value}")
            continue
        if word in _TAGS and scan.take(":"):
            effect = _TAGS[word]
            if effect is not None:
                tags[effect[0]] = effect[1]
            shown.append(f"{word}:")
            continue
        scan.i = save
        break
    command = _command_member(scan, shown)
    if command is None:
        return None
    return CmndSpec(runas, tags["nopasswd"], tags["log_input"], tags["log_output"], command, " ".join(shown))


def _userspec(text: str, path: str, number: int) -> UserSpec | None:
    scan = _Scan(text)
    users = _members(scan)
    if users is None:
        return None
    privileges: list[Privilege] = []
    while True:
        hosts = _members(scan)
        if hosts is None or not scan.take("="):
            return None
        specs: list[CmndSpec] = []
        prev: CmndSpec | None = None
        while True:
            spec = _cmndspec(scan, prev)
            if spec is None or len(specs) >= MAX_COMMANDS_PER_RULE:
                return None
            specs.append(spec)
            prev = spec
            if not scan.take(","):
                break
        privileges.append(Privilege(hosts, tuple(specs)))
        if scan.take(":"):
            continue
        return UserSpec(path, number, users, tuple(privileges)) if scan.done() else None


def _aliases(kind: str, text: str) -> list[tuple[str, tuple[Member, ...]]] | None:
    """``NAME = members : NAME2 = members`` after the alias keyword."""
    scan = _Scan(text)
    out = []
    while True:
        name = scan.word("=:,()!")
        if not _ALIAS_NAME.match(name) or not scan.take("="):
            return None
        if kind == "Cmnd_Alias":
            members: list[Member] = []
            while len(members) < MAX_LIST:
                command = _command_member(scan, [])
                if command is None:
                    return None
                members.append(command)
                if not scan.take(","):
                    break
            out.append((name, tuple(members)))
        else:
            listed = _members(scan)
            if listed is None:
                return None
            out.append((name, listed))
        if scan.take(":"):
            continue
        return out if scan.done() else None


def _split_settings(text: str) -> tuple[str, ...]:
    """Defaults settings, split on commas outside double quotes and backslash escapes."""
    out: list[str] = []
    current: list[str] = []
    quoted = False
    escaped = False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            current.append(char)
            escaped = True
        elif char == '"':
            current.append(char)
            quoted = not quoted
        elif char == "," and not quoted:
            out.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    out.append("".join(current).strip())
    return tuple(s for s in out if s)[:MAX_LIST]


def _defaults(text: str, path: str, number: int) -> DefaultsEntry | None:
    binding = text[len("Defaults"):len("Defaults") + 1]
    if binding in (":", "@", ">", "!"):
        scan = _Scan(text[len("Defaults") + 1:])
        members = _members(scan)
        if members is None:
            return None
        rest = scan.s[scan.i:]
    elif binding in _BLANK:
        members, rest = (), text[len("Defaults"):]
        binding = ""
    else:
        return None
    settings = _split_settings(rest)
    return DefaultsEntry(path, number, binding, members, settings) if settings else None


def parse(text: str, path: str) -> Parsed:
    """One sudoers file's rules, Defaults, aliases and include directives, in file order."""
    parsed = Parsed()
    for number, line in logical_lines(text):
        include = _INCLUDE.match(line)
        if include:
            parsed.entries.append(Include(number, include.group(3).strip(), bool(include.group(1) or include.group(2))))
            continue
        head = line.split(None, 1)
        word = head[0]
        if word in _ALIAS_KINDS and len(head) > 1:
            kind = _ALIAS_KINDS[word]
            defined = _aliases(kind, head[1])
            if defined is None:
                parsed.unparsed.append(Unparsed(path, number, line))
            for name, members in defined or ():
                parsed.aliases[(kind, name)] = members
            continue
        if word.startswith("Defaults"):
            entry = _defaults(line, path, number)
            if entry is None:
                parsed.unparsed.append(Unparsed(path, number, line))
            else:
                parsed.entries.append(entry)
            continue
        spec = _userspec(line, path, number)
        if spec is None:
            parsed.unparsed.append(Unparsed(path, number, line))
        else:
            parsed.entries.append(spec)
    return parsed
