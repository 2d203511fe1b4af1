"""Storage facts: filesystems, free space, encryption and SSD/HDD, swap, Docker's data root.

Every fact here is derived from the same mount table and block-device index, read once per
audit, so they are collected together.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from hostcheck.collectors._run import read_text, run_command
from hostcheck.collectors.docker_config import data_root, read_daemon_config
from hostcheck.facts import Unknown

SECTION = "storage"
TIMEOUT = 3

GIB = 1024**3
SYS_CLASS_BLOCK = Path("/sys/class/block")
LSBLK = ["lsblk", "-J", "-o", "NAME,TYPE,FSTYPE,MOUNTPOINT,ROTA,PKNAME,MAJ:MIN"]
DISK_FSTYPES = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "vfat", "exfat", "ntfs", "ntfs3",
     "fuseblk", "reiserfs", "jfs", "bcachefs", "nilfs2", "hfsplus"}
)  # fmt: skip
# Read-only images (snaps, live media) are not where anything is stored.
IMAGE_FSTYPES = frozenset({"squashfs", "iso9660", "udf", "erofs"})
QUOTA_OPTIONS = frozenset({"prjquota", "pquota", "pqnoenforce"})
_OCTAL = re.compile(r"\\([0-7]{3})")
VIRTUAL_DISK = re.compile(r"^x?vd[a-z]+$")  # virtio-blk (vda) and Xen (xvda) disks

Mount = dict[str, Any]
BlockIndex = dict[str, dict[str, Any]]


def _unescape(field: str) -> str:
    """mountinfo and /proc/swaps write space, tab, newline and backslash as \\ooo."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """proc(5) mountinfo lines; malformed lines are skipped."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        tail = fields[sep + 1 :]
        if len(tail) < 2:
            continue
        mounts.append(
            {
                "maj_min": fields[2],
                "root": _unescape(fields[3]),
                "mountpoint": _unescape(fields[4]),
                "mount_options": fields[5].split(","),
                "fstype": tail[0],
                "source": _unescape(tail[1]),
                "super_options": tail[2].split(",") if len(tail) > 2 else [],
            }
        )
    return mounts


def parse_swaps(text: str) -> list[dict[str, str]]:
    swaps = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 2 or fields[0] == "Filename":
            continue
        swaps.append({"filename": _unescape(fields[0]), "type": fields[1]})
    return swaps


def _rota(value: Any) -> bool | Unknown:
    if isinstance(value, bool):
        return value
    if value in (0, 1, "0", "1"):
        return str(value) == "1"
    return Unknown("rotational flag not reported")


def _finish(nodes: dict[str, dict[str, Any]]) -> BlockIndex:
    """Mark each device encrypted when it, or anything it is built on, is a dm-crypt mapping."""
    index: BlockIndex = {}
    for name, node in nodes.items():
        seen: set[str] = set()
        stack = [name]
        encrypted = False
        while stack and not encrypted:
            current = stack.pop()
            if current in seen or current not in nodes:
                continue
            seen.add(current)
            encrypted = nodes[current]["type"] == "crypt"
            stack.extend(nodes[current]["parents"])
        index[name] = {
            "type": node["type"],
            "maj_min": node["maj_min"],
            "rotational": node["rotational"],
            "encrypted": encrypted,
            "parents": sorted(node["parents"]),
        }
    return index


def parse_lsblk_json(text: str) -> BlockIndex | Unknown:
    """`lsblk -J` (tree or --list) -> {name: {type, maj_min, rotational, encrypted}}."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Unknown(f"lsblk gave invalid JSON: {exc}")
    top = data.get("blockdevices") if isinstance(data, dict) else None
    if not isinstance(top, list):
        return Unknown("lsblk JSON has no 'blockdevices' list")
    nodes: dict[str, dict[str, Any]] = {}
    stack: list[tuple[Any, str | None]] = [(dev, None) for dev in top]
    while stack:
        dev, parent = stack.pop()
        if not isinstance(dev, dict) or not isinstance(dev.get("name"), str):
            continue
        name = dev["name"]
        node = nodes.setdefault(
            name,
            {
                "type": str(dev.get("type") or ""),
                "maj_min": dev.get("maj:min") if isinstance(dev.get("maj:min"), str) else None,
                "rotational": _rota(dev.get("rota")),
                "parents": set(),
            },
        )
        # A device on several parents (RAID, multi-PV LVM) appears once under each.
        for up in (parent, dev.get("pkname")):
            if isinstance(up, str) and up:
                node["parents"].add(up)
        children = dev.get("children")
        if isinstance(children, list):
            stack.extend((child, name) for child in children)
    return _finish(nodes)


def sysfs_block_index(root: Path = SYS_CLASS_BLOCK) -> BlockIndex | Unknown:
    """The same index from sysfs, for machines without lsblk."""
    try:
        names = os.listdir(root)
    except OSError as exc:
        return Unknown(f"cannot list {root}: {exc.strerror or exc}")
    nodes: dict[str, dict[str, Any]] = {}
    for name in names:
        dev = root / name
        uuid = read_text(dev / "dm" / "uuid", limit=256)
        is_part = (dev / "partition").exists()
        parents = set()
        try:
            parents.update(os.listdir(dev / "slaves"))
        except OSError:
            pass
        rota_dir = dev
        if is_part:
            rota_dir = Path(os.path.realpath(dev)).parent
            parents.add(rota_dir.name)
        rota = read_text(rota_dir / "queue" / "rotational", limit=16)
        majmin = read_text(dev / "dev", limit=32)
        kind = "part" if is_part else "disk"
        if not isinstance(uuid, Unknown):
            kind = "crypt" if uuid.startswith("CRYPT-") else "dm"
        nodes[name] = {
            "type": kind,
            "maj_min": None if isinstance(majmin, Unknown) else majmin.strip(),
            "rotational": _rota(None if isinstance(rota, Unknown) else rota.strip()),
            "parents": parents,
        }
    return _finish(nodes)


def block_index() -> BlockIndex | Unknown:
    res = run_command(LSBLK, timeout=1.5)
    if not isinstance(res, Unknown) and res.returncode == 0:
        parsed = parse_lsblk_json(res.stdout)
        if not isinstance(parsed, Unknown):
            return distrust_virtual_rotational(parsed, vm_guest())
    return distrust_virtual_rotational(sysfs_block_index(), vm_guest())


def vm_guest() -> str | None:
    """The hypervisor this machine is a guest of ('kvm', 'xen', ...), or None on bare metal."""
    res = run_command(["systemd-detect-virt", "--vm"], timeout=1.0)
    if not isinstance(res, Unknown):
        answer = res.stdout.strip().splitlines()[0].strip() if res.stdout.strip() else ""
        return None if answer in ("", "none") else answer
    cpuinfo = read_text("/proc/cpuinfo", limit=4 << 20)
    if not isinstance(cpuinfo, Unknown) and re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, re.M):
        return "vm"
    return None


def distrust_virtual_rotational(index: BlockIndex | Unknown, vm: str | None) -> BlockIndex | Unknown:
    """A virtual disk's 'rotational' flag describes the emulated device, not the storage behind
    it (virtio-blk reports 1 whatever the host uses), so a VM's 'HDD' is unknown, not HDD."""
    if isinstance(index, Unknown):
        return index
    for name, info in index.items():
        if info["rotational"] is not True:
            continue
        virtual = _virtual_disk(name, index)
        if virtual:
            info["rotational"] = Unknown(
                f"{virtual} is a virtual disk: its rotational flag says nothing about the storage behind it"
            )
        elif vm:
            info["rotational"] = Unknown(
                f"inside a {vm} guest the rotational flag of {name} describes the emulated disk, "
                "not the storage behind it"
            )
    return index


def _virtual_disk(name: str, index: BlockIndex) -> str | None:
    """The virtio/Xen disk this device sits on (vda, xvdb), if any."""
    stack, seen = [name], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if VIRTUAL_DISK.match(current):
            return current
        stack.extend(index.get(current, {}).get("parents", ()))
    return None


def containing_mount(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount a path lives on: longest mountpoint prefix, the last one stacked wins."""
    best: Mount | None = None
    for mount in mounts:
        mp = mount["mountpoint"]
        if path == mp or path.startswith(mp.rstrip("/") + "/") or mp == "/":
            if best is None or len(mp) >= len(best["mountpoint"]):
                best = mount
    return best


def is_storage_mount(mount: Mount) -> bool:
    if mount["fstype"] in IMAGE_FSTYPES:
        return False
    if mount["mountpoint"] == "/":
        return True
    if mount["root"] != "/" and mount["fstype"] != "btrfs":
        return False  # a bind mount of a directory (btrfs subvolumes also have a root)
    return mount["fstype"] in DISK_FSTYPES or mount["source"].startswith("/dev/")


def _device_of(mount: Mount) -> str | None:
    """maj:min of the block device under a mount (btrfs shows an anonymous 0:N)."""
    if not mount["maj_min"].startswith("0:"):
        return str(mount["maj_min"])
    return _rdev(mount["source"]) if mount["source"].startswith("/dev/") else None


def _rdev(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" if stat.S_ISBLK(st.st_mode) else None


def _block(majmin: str | None, name: str, index: BlockIndex | Unknown, what: str) -> dict[str, Any] | Unknown:
    if isinstance(index, Unknown):
        return Unknown(f"block devices unknown: {index.reason}")
    for info in index.values():
        if majmin is not None and info["maj_min"] == majmin:
            return info
    base = os.path.basename(name)
    if name.startswith("/dev/") and base in index:
        return index[base]  # /dev/sda1, /dev/mapper/NAME: lsblk names dm devices by mapper name
    return Unknown(f"{what} is not backed by a block device")


def _mount_block(mount: Mount, index: BlockIndex | Unknown) -> dict[str, Any] | Unknown:
    what = f"{mount['mountpoint']} ({mount['fstype']} from {mount['source']})"
    return _block(_device_of(mount), mount["source"], index, what)


def _encrypted(block: dict[str, Any] | Unknown) -> bool | Unknown:
    return block if isinstance(block, Unknown) else bool(block["encrypted"])


def _space(path: str) -> tuple[float | Unknown, float | Unknown]:
    try:
        st = os.statvfs(path)
    except OSError as exc:
        why = Unknown(f"statvfs {path}: {exc.strerror or exc}")
        return why, why
    # f_bavail: what a non-root writer such as a container can still use.
    return round(st.f_blocks * st.f_frsize / GIB, 2), round(st.f_bavail * st.f_frsize / GIB, 2)


def fs_facts(mount: Mount, index: BlockIndex | Unknown, at: str | None = None) -> dict[str, Any]:
    size, free = _space(at or mount["mountpoint"])
    block = _mount_block(mount, index)
    return {
        "mountpoint": mount["mountpoint"],
        "device": mount["source"],
        "fstype": mount["fstype"],
        "size_gib": size,
        "free_gib": free,
        "encrypted": _encrypted(block),
        "rotational": block if isinstance(block, Unknown) else block["rotational"],
    }


def _existing(path: str) -> str:
    """The path itself if it exists, else its nearest existing ancestor, symlinks resolved."""
    while not os.path.exists(path) and path not in ("/", ""):
        path = os.path.dirname(path)
    return os.path.realpath(path or "/")


def docker_root_facts(
    path: str | Unknown, mounts: list[Mount], index: BlockIndex | Unknown
) -> dict[str, Any]:
    keys = ("free_gib", "size_gib", "fstype", "xfs_project_quota", "separate_mount", "encrypted", "rotational")
    if isinstance(path, Unknown):
        return {"path": path, "exists": path, **dict.fromkeys(keys, path)}
    real = _existing(path)
    mount = containing_mount(real, mounts)
    root = containing_mount("/", mounts)
    if mount is None or root is None:
        why = Unknown(f"no mount found for {real}")
        return {"path": path, "exists": os.path.isdir(path), **dict.fromkeys(keys, why)}
    fs = fs_facts(mount, index, at=real)
    options = set(mount["super_options"]) | set(mount["mount_options"])
    return {
        "path": path,
        "exists": os.path.isdir(path),
        "free_gib": fs["free_gib"],
        "size_gib": fs["size_gib"],
        "fstype": mount["fstype"],
        "xfs_project_quota": mount["fstype"] == "xfs" and bool(options & QUOTA_OPTIONS),
        # Same superblock (bind mount, btrfs subvolume) means the same space as /.
        "separate_mount": mount["maj_min"] != root["maj_min"],
        "encrypted": fs["encrypted"],
        "rotational": fs["rotational"],
    }


def swap_facts(
    swaps: list[dict[str, str]], mounts: list[Mount], index: BlockIndex | Unknown
) -> list[dict[str, Any]]:
    out = []
    for swap in swaps:
        name = swap["filename"]
        if swap["type"] == "file":
            mount = containing_mount(_existing(name), mounts)
            block = Unknown(f"no mount found for {name}") if mount is None else _mount_block(mount, index)
        else:
            block = _block(_rdev(name), name, index, name)
        out.append({"device": name, "encrypted": _encrypted(block)})
    return out


def collect(ctx: Any) -> dict[str, Any]:
    text = read_text("/proc/self/mountinfo")
    if isinstance(text, Unknown):
        return dict.fromkeys(("filesystems", "root", "home", "docker_root", "swap"), text)
    mounts = parse_mountinfo(text)
    index = block_index()

    filesystems, seen = [], set()
    for mount in mounts:
        key = (mount["maj_min"], mount["root"], mount["mountpoint"])
        if is_storage_mount(mount) and key not in seen:
            seen.add(key)
            filesystems.append(fs_facts(mount, index))

    root_mount = containing_mount("/", mounts)
    if root_mount is None:
        root: dict[str, Any] | Unknown = Unknown("no mount for / in mountinfo")
    else:
        fs = fs_facts(root_mount, index)
        root = {k: fs[k] for k in ("free_gib", "size_gib", "fstype", "encrypted", "rotational", "device")}

    home_mount = containing_mount(_existing("/home"), mounts)
    home: dict[str, Any] | Unknown = (
        Unknown("no mount for /home in mountinfo")
        if home_mount is None
        else {
            "mountpoint": home_mount["mountpoint"],
            "encrypted": _encrypted(_mount_block(home_mount, index)),
        }
    )

    swaps_text = read_text("/proc/swaps")
    swap = (
        swaps_text if isinstance(swaps_text, Unknown) else swap_facts(parse_swaps(swaps_text), mounts, index)
    )
    return {
        "filesystems": filesystems,
        "root": root,
        "home": home,
        "docker_root": docker_root_facts(data_root(read_daemon_config()), mounts, index),
        "swap": swap,
    }
