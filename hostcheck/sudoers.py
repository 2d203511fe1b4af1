"""A bounded reader of sudoers(5): what sudo grants one account, judged the way sudo judges it.

Enough of the grammar to answer "what may this account run as root, without a password, and
is it logged?" for the agent accounts the audit looks at, following sudo's own rules where they
decide that answer (sudoers(5) and sudo's plugins/sudoers/match.c, gram.y and toke.l in
sudo-project/sudo, read 2026-12-03):

- every list (users, hosts, run-as users, commands, alias members) is read from its end and the
  last entry that matches decides (``userlist_matches`` walks it in reverse): ``!agent, ALL``
  names the agent, ``ALL, !agent`` does not;
- across the files, the last rule that matches a command decides ("where there are multiple
  matches, the last match is used"), so a later ``!ALL`` takes an earlier ``ALL`` back;
- a Runas_Spec and the tags of one command spec carry to the specs after it in the same rule
  until another is given (``(root) ALL, (nobody) /bin/true`` runs ALL as root);
- aliases expand wherever they are named; ``#uid``, ``%group`` and ``%#gid`` match by number;
- a run-as group list lets the command run with that group, even as the account itself
  (``(:ALL)``); a group that gives root by another name (docker, disk, lxd) counts as root;
- ``@include``/``#include`` paths may be quoted; a relative one lies in the including file's
  directory; ``%h`` is the short host name; an ``@includedir`` is read in lexical order,
  skipping names that end in '~' or contain '.', at the place of the directive; a missing
  include directory is ignored, as sudo ignores it.

Input is treated as hostile: each file, line, list and include chain is bounded and include
loops are cut. What cannot be known is said, never guessed: a file or directory that cannot be
read, the part of a file past the size bound, the files of a directory past the count bound,
an include chain past the depth bound and a line not understood that may name the account are
each a stated gap, and the answer is then "unknown" (an unrestricted grant read before the gap
stands: a rule the reader could not see may narrow it, but the readable files already give it).

Pure: reading files is the caller's job (``read`` returns the text, ``None`` when the file
does not exist, or an ``Unknown``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from hostcheck.facts import Unknown

MAX_FILE_CHARS = 256 << 10
MAX_LOGICAL_LINE = 8 << 10
MAX_FILES = 64
MAX_INCLUDE_DEPTH = 8
MAX_RULES = 512
MAX_COMMANDS_PER_RULE = 128
MAX_LIST = 256
MAX_ALIAS_DEPTH = 32
MAX_GAPS = 16
SUDOERS = "/etc/sudoers"

MYSELF = ""  # a Runas_Spec with no user list: only as the invoking user
# Groups whose members have root by another name: the Docker daemon's socket (Docker docs,
# "Docker security": the docker group grants root-level privileges), raw block devices (Debian
# wiki, SystemGroups: disk is "mostly equivalent to root access"), the LXD daemon (LXD docs,
# security: access to it is root access). A rule that lets the account run a command with
# one of these groups, even as itself (``(:docker)``), gives root through that command.
ROOT_EQUIVALENT_GROUPS = ("docker", "disk", "lxd")
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


# ------------------------------------------------------------------ files


def include_dir_files(names: Iterable[str]) -> list[str]:
    """sudo's own rule: skip names that end in '~' or contain a '.', in lexical order."""
    return sorted(n for n in names if n and not n.endswith("~") and "." not in n)


def include_path(target: str, including: str, hostname: str | None) -> str | Unknown:
    """The file an include directive names: quotes stripped (or backslash escapes undone),
    ``%h`` the short host name ('/' in it becomes '_'), a relative path in the including
    file's directory."""
    if len(target) > 1 and target.startswith('"'):
        end = target.find('"', 1)
        path = target[1:end] if end > 0 else target[1:]
    else:
        path = re.sub(r"\\(.)", r"\1", re.split(r"(?<!\\)[ \t]", target, maxsplit=1)[0])
    if "%h" in path:
        if not hostname:
            return Unknown(f"{path} names the host (%h) and the host name is not known")
        path = path.replace("%h", hostname.split(".", 1)[0].replace("/", "_"))
    if not path:
        return Unknown("an include directive names no file")
    if not path.startswith("/"):
        path = posixpath.join(posixpath.dirname(including), path)
    return path


@dataclass
class Loaded:
    entries: list[Entry]
    aliases: dict[tuple[str, str], tuple[Member, ...]]
    unparsed: list[Unparsed]
    files: list[str]
    unreadable: list[str]
    gaps: list[str]  # what could not be read, and why: the answer may miss a rule
    hostname: str | None = None


Reader = Callable[[str], "str | Unknown | None"]
Lister = Callable[[str], "list[str] | Unknown | None"]


def load(read: Reader, listdir: Lister, root: str = SUDOERS, hostname: str | None = None) -> Loaded | Unknown:
    """Read ``root`` and what it includes, in sudo's order, bounded; Unknown when ``root``
    itself cannot be read. ``read`` returns at most ``MAX_FILE_CHARS + 1`` characters (so a
    longer file shows as one), ``None`` for a file that does not exist; ``listdir`` returns
    every name in a directory, ``None`` when it does not exist."""
    loaded = Loaded([], {}, [], [], [], [], hostname)
    seen: set[str] = set()
    rules = 0

    def gap(text: str) -> None:
        if len(loaded.gaps) < MAX_GAPS:
            loaded.gaps.append(text[:300])
        elif len(loaded.gaps) == MAX_GAPS:
            loaded.gaps.append("and more gaps not listed")

    def visit(path: str, depth: int, source: str) -> Unknown | None:
        nonlocal rules
        if path in seen:
            return None  # an include loop: the file's rules are already in place
        if depth > MAX_INCLUDE_DEPTH:
            gap(f"{path} ({source}) is more than {MAX_INCLUDE_DEPTH} includes deep: not read")
            return None
        if len(loaded.files) >= MAX_FILES:
            gap(f"{path} ({source}) not read: more than {MAX_FILES} sudoers files")
            return None
        seen.add(path)
        text = read(path)
        if text is None:
            if depth == 0:
                return Unknown(f"{path} does not exist")
            gap(f"{path} ({source}) does not exist: sudo reports a parse error for a missing include")
            return None
        if isinstance(text, Unknown):
            loaded.unreadable.append(path)
            if depth == 0:
                return text
            gap(f"{path} ({source}) could not be read: {text.reason}")
            return None
        loaded.files.append(path)
        if len(text) > MAX_FILE_CHARS:
            gap(f"{path} is longer than {MAX_FILE_CHARS} characters: the rest was not read")
            text = text[:MAX_FILE_CHARS]
        part = parse(text, path)
        loaded.aliases.update(part.aliases)
        loaded.unparsed.extend(part.unparsed)
        for entry in part.entries:
            if not isinstance(entry, Include):
                if isinstance(entry, UserSpec):
                    if rules >= MAX_RULES:
                        gap(f"more than {MAX_RULES} rules: {path}:{entry.line} and the rules after it not read")
                        return None
                    rules += 1
                loaded.entries.append(entry)
                continue
            where = f"included from {path}:{entry.line}"
            target = include_path(entry.target, path, hostname)
            if isinstance(target, Unknown):
                gap(f"{where}: {target.reason}")
                continue
            if not entry.is_dir:
                visit(target, depth + 1, where)
                continue
            names = listdir(target)
            if names is None:
                continue  # sudo ignores a missing include directory
            if isinstance(names, Unknown):
                loaded.unreadable.append(target)
                gap(f"{target} ({where}) could not be listed: {names.reason}")
                continue
            files = include_dir_files(names)
            room = max(0, MAX_FILES - len(loaded.files))
            if len(files) > room:
                gap(f"{target} holds {len(files)} sudoers files: only the first {room} in sudo's "
                    f"(lexical) order were read, up to {files[room - 1] if room else 'none'}")
            for name in files[:room]:
                visit(f"{target.rstrip('/')}/{name}", depth + 1, where)
        return None

    failure = visit(root, 0, "the main file")
    if failure is not None:
        return failure
    return loaded


def record(read: Reader, listdir: Lister, root: str = SUDOERS, hostname: str | None = None) -> dict[str, Any]:
    """Read sudoers as :func:`load` does and keep what was read, the evidence a collector
    stores: every file's text (bounded as ``read`` bounds it; ``None`` when it does not exist)
    or why it could not be read, likewise every include directory's names. :func:`replay`
    reads the same rules from it, so they are judged wherever and whenever the checks run."""
    files: list[dict[str, Any]] = []
    dirs: list[dict[str, Any]] = []

    def kept_read(path: str) -> str | Unknown | None:
        text = read(path)
        files.append({"path": path, "text": None if isinstance(text, Unknown) else text,
                      "unreadable": text.reason if isinstance(text, Unknown) else None})
        return text

    def kept_listdir(path: str) -> list[str] | Unknown | None:
        names = listdir(path)
        dirs.append({"path": path, "names": None if isinstance(names, Unknown) else names,
                     "unreadable": names.reason if isinstance(names, Unknown) else None})
        return names

    load(kept_read, kept_listdir, root, hostname)
    return {"root": root, "hostname": hostname, "files": files, "dirs": dirs}


def replay(recorded: Any) -> Loaded | Unknown:
    """:func:`load` over what :func:`record` kept (a saved facts file's ``agents.sudoers``); a
    file or directory it did not keep reads as not recorded (a gap), never as absent."""
    if isinstance(recorded, Unknown):
        return recorded
    if not isinstance(recorded, dict) or not isinstance(recorded.get("files"), list):
        return Unknown("the sudoers files read were not recorded")

    def kept(items: Any, key: str) -> dict[str, Any]:
        return {str(i["path"]): (Unknown(str(i["unreadable"])) if i.get("unreadable") else i.get(key))
                for i in items if isinstance(i, dict) and "path" in i}

    files, dirs = kept(recorded["files"], "text"), kept(recorded.get("dirs") or [], "names")

    def read(path: str) -> str | Unknown | None:
        return files[path] if path in files else Unknown(f"{path} was not recorded")

    def listdir(path: str) -> list[str] | Unknown | None:
        return dirs[path] if path in dirs else Unknown(f"{path} was not recorded")

    hostname = recorded.get("hostname")
    return load(read, listdir, str(recorded.get("root") or SUDOERS), hostname if isinstance(hostname, str) else None)


# ------------------------------------------------------------------ matching


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
