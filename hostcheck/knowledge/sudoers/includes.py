"""The sudoers files sudo reads: the main file and what its @include/@includedir directives
name, in sudo's order, each file, chain and count bounded, and what could not be read stated as
a gap. Pure: reading files is the caller's job (``read`` returns the text, ``None`` when the
file does not exist, or an ``Unknown``)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hostcheck.facts import Unknown
from hostcheck.knowledge.sudoers.grammar import Entry, Include, Member, Unparsed, UserSpec, parse

MAX_FILE_CHARS = 256 << 10
MAX_FILES = 64
MAX_INCLUDE_DEPTH = 8
MAX_RULES = 512
MAX_GAPS = 16
SUDOERS = "/etc/sudoers"


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
