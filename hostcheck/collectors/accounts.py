"""Who and what shares this machine with rented containers: users, sessions, credentials."""

from __future__ import annotations

import os
import platform
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcheck.collectors._proc import host_process_names
from hostcheck.collectors._run import read_text, run_command
from hostcheck.facts import Unknown
from hostcheck.knowledge.sudoers import includes

SECTION = "isolation"
TIMEOUT = 3.0

HUMAN_UID_MIN = 1000
HUMAN_UID_MAX = 65534  # exclusive: 65534 is nobody
NON_LOGIN_SHELLS = frozenset({"nologin", "false", "true", "sync", "halt", "shutdown", ""})
SUDO_GROUPS = ("sudo", "wheel", "admin")
# The accounts cloud images create for their first login (cloud-init's default_user, the
# distributions' own images), each given sudo without a password.
CLOUD_ACCOUNTS = ("ubuntu", "debian", "admin", "ec2-user", "centos", "fedora", "rocky", "almalinux",
                  "cloud-user", "azureuser", "opc")
GRAPHICAL_SESSION_TYPES = frozenset({"x11", "wayland", "mir"})
# /proc/PID/comm is cut at 15 characters, so names here stay short.
GRAPHICAL_PROCESSES = frozenset(
    {"Xorg", "X", "Xwayland", "gnome-shell", "kwin", "kwin_x11", "kwin_wayland", "plasmashell",
     "sway", "weston", "Hyprland", "mutter", "cinnamon", "xfwm4"}
)
DISPLAY_MANAGER_PROCESSES = ("gdm", "gdm3", "sddm", "lightdm", "lxdm", "xdm", "slim", "greetd", "ly")
DISPLAY_MANAGER_UNIT = "/etc/systemd/system/display-manager.service"
DEFAULT_DISPLAY_MANAGER = "/etc/X11/default-display-manager"
"""Debian's record of the chosen display manager (the path of its binary, e.g. /usr/sbin/gdm3)."""

# (kind, path relative to a home); directories count as present when they exist.
CREDENTIAL_PATHS: tuple[tuple[str, str], ...] = (
    ("aws", ".aws/credentials"),
    ("azure", ".azure"),
    ("gcloud", ".config/gcloud"),
    ("kube", ".kube/config"),
    ("browser_profile", ".mozilla/firefox"),
    ("browser_profile", ".config/google-chrome"),
    ("browser_profile", ".config/chromium"),
    ("browser_profile", ".config/BraveSoftware"),
    ("password_store", ".password-store"),
    ("password_store", ".local/share/keyrings"),
)


@dataclass(frozen=True)
class PasswdEntry:
    name: str
    uid: int
    gid: int
    home: str
    shell: str


@dataclass(frozen=True)
class GroupEntry:
    name: str
    gid: int
    members: tuple[str, ...]


def parse_passwd(text: str) -> list[PasswdEntry]:
    """Entries of an /etc/passwd text; malformed lines (and NIS '+' lines) are skipped."""
    entries = []
    for line in text.splitlines():
        if not line or line.startswith(("#", "+", "-")):
            continue
        fields = line.split(":")
        if len(fields) != 7:
            continue
        try:
            uid, gid = int(fields[2]), int(fields[3])
        except ValueError:
            continue
        entries.append(PasswdEntry(fields[0], uid, gid, fields[5], fields[6]))
    return entries


def parse_group(text: str) -> list[GroupEntry]:
    """Entries of an /etc/group text; malformed lines are skipped."""
    entries = []
    for line in text.splitlines():
        if not line or line.startswith(("#", "+", "-")):
            continue
        fields = line.split(":")
        if len(fields) != 4:
            continue
        try:
            gid = int(fields[2])
        except ValueError:
            continue
        members = tuple(m.strip() for m in fields[3].split(",") if m.strip())
        entries.append(GroupEntry(fields[0], gid, members))
    return entries


def is_login_shell(shell: str) -> bool:
    return os.path.basename(shell.strip()) not in NON_LOGIN_SHELLS


def human_accounts(passwd: list[PasswdEntry]) -> list[dict[str, Any]]:
    return [
        {"name": e.name, "uid": e.uid, "home": e.home, "shell": e.shell}
        for e in passwd
        if HUMAN_UID_MIN <= e.uid < HUMAN_UID_MAX and is_login_shell(e.shell)
    ]


def group_members(
    groups: list[GroupEntry], passwd: list[PasswdEntry], names: tuple[str, ...]
) -> list[str]:
    """Members of any of the named groups: listed members plus users whose primary group it is."""
    wanted = [g for g in groups if g.name in names]
    gids = {g.gid for g in wanted}
    members = {m for g in wanted for m in g.members}
    members.update(e.name for e in passwd if e.gid in gids)
    return sorted(members)


def _present(path: Path) -> bool | None:
    """True/False for present/absent; None when a parent cannot be traversed."""
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return False
    except PermissionError:
        return None
    except OSError:
        return None
    return True


def scan_credentials(homes: list[tuple[str, str]]) -> tuple[list[dict[str, str]], list[str]]:
    """Credential files present in each (user, home); never opens a file.

    Returns (credentials, unreadable homes). A home where any lookup hit "permission
    denied" is unreadable: what was found there is reported, but the list may be incomplete.
    """
    found: list[dict[str, str]] = []
    unreadable: list[str] = []
    seen_homes: set[str] = set()
    for user, home_s in homes:
        if not home_s or home_s in seen_homes:
            continue
        seen_homes.add(home_s)
        home = Path(home_s)
        blocked = False
        try:
            if not stat.S_ISDIR(home.stat().st_mode):
                continue
            os.listdir(home)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            blocked = True
        ssh_dir = home / ".ssh"
        try:
            names = sorted(os.listdir(ssh_dir))
        except (FileNotFoundError, NotADirectoryError):
            names = []
        except OSError:
            names, blocked = [], True
        for name in names:
            if name.startswith("id_") and not name.endswith(".pub"):
                found.append({"kind": "ssh_private_key", "user": user, "path": str(ssh_dir / name)})
        for kind, rel in CREDENTIAL_PATHS:
            present = _present(home / rel)
            if present is None:
                blocked = True
            elif present:
                found.append({"kind": kind, "user": user, "path": str(home / rel)})
        if blocked:
            unreadable.append(home_s)
    return found, unreadable


def _proc_hides_processes() -> bool:
    """True when /proc is mounted with hidepid, so other users' processes are invisible."""
    text = read_text("/proc/self/mountinfo")
    if isinstance(text, Unknown):
        return False
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/proc" and "hidepid=" in line:
            return "hidepid=0" not in line and "hidepid=off" not in line
    return False


def _logind_graphical() -> bool | Unknown:
    listing = run_command(["loginctl", "list-sessions", "--no-legend", "--no-pager"], timeout=1.5)
    if isinstance(listing, Unknown):
        return listing
    if listing.returncode != 0:
        return Unknown(f"loginctl failed: {(listing.stderr or listing.stdout).strip()[:200]}")
    deadline = time.monotonic() + 1.5  # many sessions must not eat the collector's budget
    for line in listing.stdout.splitlines():
        fields = line.split()
        if not fields:
            continue
        left = deadline - time.monotonic()
        if left <= 0.05:
            return Unknown("loginctl too slow to inspect every session")
        shown = run_command(
            ["loginctl", "show-session", fields[0], "-p", "Type", "--value"], timeout=min(1.0, left)
        )
        if not isinstance(shown, Unknown) and shown.stdout.strip() in GRAPHICAL_SESSION_TYPES:
            return True
    return False


MACOS_CONSOLE = "/dev/console"


def macos_console_session(console: str = MACOS_CONSOLE) -> bool | Unknown:
    """Whether a person is logged in at a Mac's screen: macOS gives /dev/console to the user of
    the graphical session, and to root while only the login window is up (WindowServer and
    loginwindow run either way, so the processes say nothing)."""
    try:
        return os.stat(console).st_uid != 0
    except OSError as exc:
        return Unknown(f"cannot stat {console}: {exc.strerror or exc}")


def graphical_session(comms: list[str]) -> bool | Unknown:
    if platform.system() == "Darwin":
        return macos_console_session()
    logind = _logind_graphical()
    if logind is True or any(c in GRAPHICAL_PROCESSES for c in comms):
        return True
    if os.geteuid() != 0 and _proc_hides_processes():
        why = "/proc is mounted with hidepid, other users' display servers are invisible without root"
        if isinstance(logind, Unknown):
            return Unknown(f"{why}; {logind.reason}")
        return logind  # logind answered for every session
    return False


def display_manager(comms: list[str], root: str = "/") -> str | None:
    """The display manager enabled (systemd's display-manager.service alias, or Debian's
    /etc/X11/default-display-manager) or running; ``root`` reads another tree's files."""
    try:
        target = os.readlink(os.path.join(root, DISPLAY_MANAGER_UNIT.lstrip("/")))
    except OSError:
        target = ""
    if target and target != "/dev/null":
        name = os.path.basename(target).removesuffix(".service")
        return "gdm" if name == "gdm3" else name
    chosen = read_text(os.path.join(root, DEFAULT_DISPLAY_MANAGER.lstrip("/")), limit=4096)
    if not isinstance(chosen, Unknown) and chosen.strip():
        name = os.path.basename(chosen.strip().splitlines()[0])[:64]
        return "gdm" if name == "gdm3" else name
    for name in DISPLAY_MANAGER_PROCESSES:
        if name in comms:
            return "gdm" if name == "gdm3" else name
    return None


def apparmor_enabled() -> bool | Unknown:
    text = read_text("/sys/module/apparmor/parameters/enabled")
    if isinstance(text, Unknown):
        if os.path.isdir("/sys/module") and not os.path.exists("/sys/module/apparmor"):
            return False  # the kernel has no AppArmor
        return Unknown(f"AppArmor state unknown: {text.reason}")
    return text.strip() == "Y"


def collect(ctx: Any) -> dict[str, Any]:
    comms = host_process_names()
    facts: dict[str, Any] = {
        "graphical_session": graphical_session(comms),
        "display_manager": display_manager(comms),
        "apparmor_enabled": apparmor_enabled(),
    }
    passwd_text = read_text("/etc/passwd")
    group_text = read_text("/etc/group")
    passwd = [] if isinstance(passwd_text, Unknown) else parse_passwd(passwd_text)
    groups = [] if isinstance(group_text, Unknown) else parse_group(group_text)

    if isinstance(passwd_text, Unknown):
        facts["human_accounts"] = passwd_text
        facts["credentials"] = passwd_text
        facts["unreadable_homes"] = passwd_text
        humans: list[dict[str, Any]] = []
    else:
        humans = human_accounts(passwd)
        facts["human_accounts"] = humans
        homes = [(h["name"], h["home"]) for h in humans] + [("root", "/root")]
        facts["credentials"], facts["unreadable_homes"] = scan_credentials(homes)

    if isinstance(group_text, Unknown):
        facts["docker_group_members"] = group_text
        facts["sudo_group_members"] = group_text
    else:
        facts["docker_group_members"] = group_members(groups, passwd, ("docker",))
        facts["sudo_group_members"] = group_members(groups, passwd, SUDO_GROUPS)
    if isinstance(passwd_text, Unknown):
        facts["cloud_accounts"] = facts["sudoers"] = passwd_text
    else:
        facts["cloud_accounts"] = cloud_accounts(passwd, groups)
        # The rules as read, for the checks to judge (what sudo grants each cloud account); read
        # only when a cloud account is there to judge. sudoers is root-only: the record then
        # keeps why it could not be read.
        facts["sudoers"] = sudoers_record() if facts["cloud_accounts"] else None
    return facts


MAX_INCLUDE_DIR_ENTRIES = 4096


def _exists(path: str) -> bool | Unknown:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return False
    except PermissionError:
        return Unknown(f"permission denied looking up {path}")
    except OSError as exc:
        return Unknown(f"cannot look up {path}: {exc.strerror or exc}")
    return True


def _listdir(path: str) -> list[str] | Unknown | None:
    """The regular files in a sudoers include directory (sudo skips everything else), all of
    them: the reader sorts them as sudo does and says so when it reads fewer. None when the
    directory does not exist (sudo ignores it)."""
    names: list[str] = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if len(names) >= MAX_INCLUDE_DIR_ENTRIES:
                    return Unknown(f"{path} holds more than {MAX_INCLUDE_DIR_ENTRIES} entries: not read")
                try:
                    if entry.is_file(follow_symlinks=True):
                        names.append(entry.name)
                except OSError:
                    names.append(entry.name)  # reading it will say why it cannot be read
    except FileNotFoundError:
        return None
    except PermissionError:
        return Unknown(f"permission denied listing {path} (needs root)")
    except OSError as exc:
        return Unknown(f"cannot list {path}: {exc.strerror or exc}")
    return names


def _read_sudoers(path: str) -> str | Unknown | None:
    # One character past the bound, so the reader sees that a file is longer and says so.
    if _exists(path) is False:
        return None
    return read_text(path, limit=includes.MAX_FILE_CHARS + 1)


def _groups_of(entry: PasswdEntry, groups: list[GroupEntry]) -> list[GroupEntry]:
    return sorted((g for g in groups if entry.name in g.members or g.gid == entry.gid), key=lambda g: g.name)


def cloud_accounts(passwd: list[PasswdEntry], groups: list[GroupEntry]) -> list[dict[str, Any]]:
    """The default cloud accounts present, with what sudoers' rules match them by (name, uid,
    groups, gids); the checks work out what sudo grants them."""
    return [sudo_identity(entry, groups) for entry in passwd if entry.name in CLOUD_ACCOUNTS]


def sudo_identity(entry: PasswdEntry, groups: list[GroupEntry]) -> dict[str, Any]:
    """What sudoers' rules match an account by: its name, uid, groups and gids (``#uid``,
    ``%group``, ``%#gid``)."""
    member_of = _groups_of(entry, groups)
    return {"name": entry.name, "uid": entry.uid, "groups": [g.name for g in member_of],
            "gids": sorted({g.gid for g in member_of} | {entry.gid})}


def sudoers_record() -> dict[str, Any]:
    """sudoers and the files it includes, as read (bounded); ``includes.SUDOERS`` is looked up
    here, when called, so that a test can point it at its own tree."""
    return includes.record(_read_sudoers, _listdir, includes.SUDOERS, hostname=socket.gethostname())
