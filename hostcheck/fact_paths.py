"""The facts layout, declared once: every fact a collector writes and a check may read.

Over 500 lines for a reason: it is the one table of facts, so that declaring a fact is one line
beside its section's others; its types and path look-ups sit with it.

Each :class:`Fact` names its dotted path, its type, its unit, what it means, how ``--redact``
treats it and, where it is written only in some runs, when. Everything else derives from this
table: ``docs/facts.md`` (``scripts/gen_facts_doc.py``, held to it by a test), the JSON Schema
of a facts snapshot (``hostcheck/schema/facts-v3.json``), the types a snapshot is validated
against on load and the shape a collector must write (no undeclared key, no declared key
missing; both checked in :mod:`hostcheck.fact_validation`), the collectors' field lists
(:func:`fields`) and the redaction kinds (:data:`KINDS`). :func:`hostcheck.facts.lookup`
refuses a path that is not declared here, so a misspelt path in a check is an ``error``
finding, never a quiet unknown.

``*`` stands for a list index or a key chosen by the data (an sshd keyword, a systemd unit).

Redaction kinds (:mod:`hostcheck.redact`): ``host`` (a host name, or HOST:PORT), ``addr`` (an
address, maybe with a port, zone or prefix length), ``user`` / ``users`` (account names),
``path`` (a file or device path, a remote mount source), ``mac``, ``iface`` (an interface
name), ``serial``, ``uuid``, ``container``, ``uri``, ``sshd`` (an sshd setting, by keyword),
``text`` (free text: every identifier in it goes). A fact without a kind is a value the checks
compare (``system.os_id``, a GPU model, a verdict word): only what is shaped like an identifier
is replaced there. A kind declared on a parent covers its children.

Facts that accumulate over time have two declared forms: a :data:`FactType.COUNTER` (a running
total since a reference time: NVML's violation counters) and a :data:`FactType.WINDOW` (an
amount within a stated start and end: what a recorder saw). Both expand to declared children
(:data:`COUNTER_FIELDS`, :data:`WINDOW_FIELDS`); :mod:`hostcheck.accumulated` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache

from hostcheck.errors import UndeclaredFact
from hostcheck.models import InboundResult, NatBehaviour, NatVerdict

UNKNOWN_KEY = "$unknown"
FACTS_FORMAT = 3
"""The layout's version: bumped when the shape changes (a fact renamed, retyped, removed or
given another meaning), with a step in :mod:`hostcheck.upgrade` from the previous one. A fact
added is no change of format: files written before it simply lack it ("not collected")."""


class FactType(StrEnum):
    BOOL = "bool"
    INT = "integer"
    NUMBER = "number"
    TEXT = "text"
    TIME = "time"  # ISO 8601 text
    TEXTS = "list of text"
    SETTING = "text or list of text"
    OBJECT = "object"
    LIST = "list"  # of objects, whose fields are declared under PATH.*
    MAP = "map"  # keys chosen by the data, values declared as PATH.*
    RAW = "recorded"  # evidence kept as the system printed it (bounded), judged by pure code
    COUNTER = "counter"
    WINDOW = "window"


@dataclass(frozen=True)
class Fact:
    path: str
    type: FactType
    meaning: str
    unit: str = ""
    redact: str = ""
    choices: tuple[str, ...] = ()
    """The words it holds today, for the reader (not enforced: older files may hold others)."""
    when: str = ""
    """Empty: written whenever its parent is. Else the case in which it is written at all."""


@dataclass(frozen=True)
class Section:
    name: str
    intro: str
    also: str = ""
    """Who else writes it, beside the collectors whose ``SECTION`` it is (docs/facts.md lists both)."""


COUNTER_FIELDS = (
    ("total", FactType.NUMBER, "the running total, in the fact's unit"),
    ("since", FactType.TIME, "when the total started counting (ISO 8601 UTC)"),
    ("read_at", FactType.TIME, "when it was read (ISO 8601 UTC)"),
)
WINDOW_FIELDS = (
    ("total", FactType.NUMBER, "the amount within the window, in the fact's unit"),
    ("start", FactType.TIME, "the window's start (ISO 8601 UTC)"),
    ("end", FactType.TIME, "the window's end (ISO 8601 UTC)"),
)

T = FactType
F = Fact
CHASSIS = ("laptop", "desktop", "server", "other")
SCOPES = ("loopback", "link-local", "private", "cgnat", "global", "other")
IFACE_KINDS = ("wired", "wireless", "virtual", "loopback")
NAT_WORDS = tuple(NatBehaviour)
TRISTATE = tuple(NatVerdict)
INBOUND = tuple(InboundResult)

SECTIONS: tuple[Section, ...] = (
    Section("meta", "About the run that wrote the facts.", also="the runner"),
    Section("gpu", """Per-device NVML readings, and every PCI display adapter from sysfs. Any
device field may be unknown (unsupported on GeForce, the GPU lost mid-query, ...). Whether a
device is a laptop part is judged by GPU-1060 from `name` and `power.chassis_type`."""),
    Section("system", """On macOS `os_id` is "macos", `os_version_id` the release ("14.5") and
`cpu_model` sysctl's brand string ("Apple M2 Pro")."""),
    Section("power", "Chassis, batteries and AC, and whether systemd may put the machine to sleep."),
    Section("storage", """`docker_root.path` is the data root dockerd uses: a `--data-root` flag (the
running dockerd's command line, else the systemd unit's ExecStart with its drop-ins), else
`data-root`/`graph` in daemon.json, else `/var/lib/docker`; unknown when daemon.json cannot be
read and no flag settles it. `rotational` is unknown on virtio/Xen disks and, when true,
inside a VM: there the flag describes the emulated disk, not the storage behind it."""),
    Section("isolation", """Who uses this machine and what of theirs is on it: credentials are
recorded by presence only, never by contents. When a default cloud account is present,
`sudoers` keeps sudoers and the files it includes as read (as `agents.sudoers` does: in sudo's
order, bounded) and `cloud_accounts` each account's uid, groups and gids; ISO-1070 works out
from them what sudo grants each account, so a saved facts file is judged by today's rules. `/etc/sudoers` is 0440 root: an
unprivileged audit keeps why it could not be read (ISO-1070 says unknown)."""),
    Section("docker", """When the daemon is not reachable, daemon settings come from
`/etc/docker/daemon.json` if readable (`daemon_json`: only `no-new-privileges`, `live-restore`,
`icc`, `userland-proxy`, `data-root`, `graph`, `default-runtime`, `userns-remap` and the runtime
names under `runtimes`; proxies, registry mirrors, hosts, TLS paths and everything else are
never collected) and the rest are unknown. Flags of a running `dockerd` count only when that
process runs as root (any user can name a process `dockerd`). With `--offline`, a network
`DOCKER_HOST` (tcp://, ssh://) is not contacted: `reachable` is unknown. `containers` come from
`GET /containers/{id}/json`, never from inside a container (at most 200)."""),
    Section("agents", """Provider agents found on this machine, recognised by the names in
`policies/agents/agents.yaml` (accounts, systemd units, paths, dpkg packages; containers are
matched by the checks against the images in `docker.containers`). `sudoers` keeps sudoers and
the files it includes as read (in sudo's order, bounded); the checks work out from it what each
agent account may run as root, with sudo's matching rules, so a saved facts file is judged by
today's rules. `/etc/sudoers` is 0440 root: an unprivileged audit keeps why it could not be read
(the checks say unknown). `sudo_activity` comes from sudo's own
journal entries (`SYSLOG_IDENTIFIER=sudo`); unknown when the journal is not readable (not root
and not in `systemd-journal` or `adm`)."""),
    Section("ssh", """`settings` holds only the keywords checks read and those that say who may
log in (commands, paths and banners are not collected), as `sshd -T` prints them
(`without-password` is reported as its synonym `prohibit-password`; keywords given several
times, such as `port`, are lists)."""),
    Section("packages", "Update policy and the NVIDIA packages."),
    Section("network", """`firewall` is the ruleset
as recorded evidence, judged by the checks (NET-1010, NET-1080, DOC-1070, ISO-1040, ISO-1060) with
today's rules, so `hostcheck audit --facts FILE` re-judges a saved file; root is needed to read
it. ufw is recognised by its chain ufw-user-input (gone once `ufw disable` ran); NET-1080 walks each port the host
profile's `inet hostcheck` table opens to everyone through ufw-user-input (where `ufw allow`
puts its rules). ISO-1040 walks probe packets from each container bridge (`docker0` when there is none yet) to
private, shared, link-local (cloud metadata), multicast and (for bridges with IPv6) ULA,
link-local and multicast IPv6 destinations, and to the host itself, through every nftables base
chain they meet; matches the walk does not model (xtables extensions, verdict maps, rate
limits) make a probe undetermined, as do legacy iptables tables when nothing drops it.
`nat`, `path`, `cgnat` and `inbound` come from the reachability collector (`--offline` makes
each unknown and sends nothing); `path` is the raw evidence the NAT checks judge. `port_range`
is read by the same collector, and its first, last and evenly spaced
middle ports ride in the inbound probe, TCP and UDP. `bandwidth`
is written only by `hostcheck audit --speedtest --probe URL` (NET-1070 is unknown without it).""", also="speedtest"),
    Section("watch", """The reliability window from a `hostcheck watch` database
(`/var/lib/hostcheck-watch/watch.db`, or `hostcheck audit --watch-db PATH`), opened read-only;
only the last 30 days are read."""),
)

_DEVICE = "gpu.devices.*"
_NET = "network"
FACTS: tuple[Fact, ...] = (
    # ------------------------------------------------------------------ meta
    F("meta", T.OBJECT, "about this run"),
    F("meta.facts_format", T.INT, "the layout's version (this page: 3)"),
    F("meta.hostcheck_version", T.TEXT, "the hostcheck that collected the facts"),
    F("meta.hostname", T.TEXT, "the machine's host name", redact="host"),
    F("meta.collected_at", T.TIME, "when the facts were collected"),
    F("meta.offline", T.BOOL, "collected with `--offline` (nothing was sent)"),
    F("meta.duration_s", T.NUMBER, "how long collecting took", unit="s"),
    F("meta.collector_timings_s", T.MAP, "how long each collector took"),
    F("meta.collector_timings_s.*", T.NUMBER, "one collector's time", unit="s"),
    F("meta.source", T.TEXT, "where the facts come from", choices=("live", "snapshot")),
    F("meta.description", T.TEXT, "what a snapshot represents", redact="text", when="snapshots written by hand"),
    F("meta.upgraded_from", T.INT, "the format the facts were upgraded from (on load, or by `hostcheck facts --upgrade FILE`)",
      when="upgraded facts"),
    # ------------------------------------------------------------------ gpu
    F("gpu", T.OBJECT, "the GPUs"),
    F("gpu.nvml", T.OBJECT, "whether NVML could be used"),
    F("gpu.nvml.available", T.BOOL, "NVML answered"),
    F("gpu.nvml.reason", T.TEXT, "why NVML is not usable (library missing, no driver, init failed); null when it is",
      redact="text"),
    F("gpu.driver_version", T.TEXT, "the NVIDIA driver (\"580.95.05\")"),
    F("gpu.cuda_driver_version", T.TEXT, "the newest CUDA the driver supports (\"13.2\")"),
    F("gpu.nvml_version", T.TEXT, "NVML's own version"),
    F("gpu.devices", T.LIST, "one entry per NVIDIA GPU NVML sees"),
    F(f"{_DEVICE}.index", T.INT, "NVML's index"),
    F(f"{_DEVICE}.name", T.TEXT, "the product name (\"NVIDIA GeForce RTX 3080 Ti Laptop GPU\")"),
    F(f"{_DEVICE}.uuid", T.TEXT, "the GPU's UUID", redact="uuid"),
    F(f"{_DEVICE}.serial", T.TEXT, "the board serial (datacenter cards)", redact="serial"),
    F(f"{_DEVICE}.pci_bus_id", T.TEXT, "PCI address (\"00000000:01:00.0\")"),
    F(f"{_DEVICE}.vram_total_mib", T.INT, "memory on the card", unit="MiB"),
    F(f"{_DEVICE}.vram_used_mib", T.INT, "memory in use now", unit="MiB"),
    F(f"{_DEVICE}.power_limit_w", T.NUMBER, "the enforced power cap (what the card obeys now)", unit="W"),
    F(f"{_DEVICE}.power_default_w", T.NUMBER, "the card's default power limit", unit="W"),
    F(f"{_DEVICE}.power_min_w", T.NUMBER, "the lowest settable power limit", unit="W"),
    F(f"{_DEVICE}.power_max_w", T.NUMBER, "the highest settable power limit", unit="W"),
    F(f"{_DEVICE}.power_draw_w", T.NUMBER, "power drawn at the reading", unit="W"),
    F(f"{_DEVICE}.temperature_c", T.NUMBER, "GPU core temperature", unit="°C"),
    F(f"{_DEVICE}.slowdown_temp_c", T.NUMBER, "the temperature at which the card slows itself down", unit="°C"),
    F(f"{_DEVICE}.pcie_gen_current", T.INT, "PCIe generation the link runs at now (drops at idle)"),
    F(f"{_DEVICE}.pcie_gen_max", T.INT, "the highest PCIe generation of card and slot"),
    F(f"{_DEVICE}.pcie_width_current", T.INT, "PCIe lanes in use now", unit="lanes"),
    F(f"{_DEVICE}.pcie_width_max", T.INT, "the most PCIe lanes card and slot support", unit="lanes"),
    F(f"{_DEVICE}.ecc_enabled", T.BOOL, "ECC memory on (unknown when the card has none)"),
    F(f"{_DEVICE}.persistence_mode", T.BOOL, "the driver keeps the GPU initialised with no client"),
    F(f"{_DEVICE}.display_active", T.BOOL, "a display is driven by this GPU"),
    F(f"{_DEVICE}.throttle_reasons", T.TEXTS,
      "clock event reasons active at the reading (\"sw_power_cap\", \"hw_slowdown\", \"gpu_idle\", ...)"),
    F(f"{_DEVICE}.thermal_slowdown", T.COUNTER,
      "time NVML counted the GPU slowed for heat (its thermal violation counter, nvmlDeviceGetViolationStatus). "
      "NVML does not say when it started counting: `since` is the boot, which holds while the driver keeps "
      "the GPU initialised (persistence mode on) and makes the share a lower bound otherwise", unit="s"),
    F(f"{_DEVICE}.mig_mode", T.BOOL, "Multi-Instance GPU on (unknown when the card has none)"),
    F(f"{_DEVICE}.architecture", T.TEXT, "\"pascal\", \"turing\", \"ampere\", \"ada\", \"hopper\", \"blackwell\" ... "
      "(nvmlDeviceGetArchitecture; unknown on drivers that predate it)"),
    F(f"{_DEVICE}.compute_capability", T.TEXT, "CUDA compute capability (\"8.6\")"),
    F("gpu.display_adapters", T.LIST, "every PCI display-class device (class 0x03xxxx) from sysfs, whatever its driver"),
    F("gpu.display_adapters.*.pci_address", T.TEXT, "PCI address"),
    F("gpu.display_adapters.*.vendor_id", T.TEXT, "PCI vendor (\"0x10de\")"),
    F("gpu.display_adapters.*.vendor", T.TEXT, "the vendor's name", choices=("nvidia", "amd", "intel", "other")),
    F("gpu.display_adapters.*.device_id", T.TEXT, "PCI device id"),
    F("gpu.display_adapters.*.driver", T.TEXT, "the bound kernel driver; null when none is bound"),
    # ------------------------------------------------------------------ system
    F("system", T.OBJECT, "CPU, memory, OS and firmware"),
    F("system.cpu_model", T.TEXT, "the CPU's brand string"),
    F("system.cpu_arch", T.TEXT, "machine architecture (\"x86_64\", \"aarch64\")"),
    F("system.os_kernel_name", T.TEXT, "the kernel's name (\"Linux\", \"Darwin\")"),
    F("system.cpu_physical_cores", T.INT, "physical CPU cores", unit="cores"),
    F("system.cpu_logical_cores", T.INT, "logical CPUs (threads)", unit="threads"),
    F("system.cpu_avx", T.BOOL, "the CPU has AVX"),
    F("system.ram_total_mib", T.INT, "installed memory the OS sees", unit="MiB"),
    F("system.os_id", T.TEXT, "os-release ID (\"ubuntu\", \"debian\", \"macos\")"),
    F("system.os_version_id", T.TEXT, "os-release VERSION_ID (\"22.04\")"),
    F("system.os_pretty", T.TEXT, "os-release PRETTY_NAME"),
    F("system.kernel", T.TEXT, "the kernel release"),
    F("system.virtualization", T.TEXT,
      "\"none\", \"kvm\", \"container\", ... (systemd-detect-virt, else the CPU's hypervisor flag)"),
    F("system.secure_boot", T.BOOL, "UEFI Secure Boot on"),
    F("system.iommu_enabled", T.BOOL, "the IOMMU is on (/sys/kernel/iommu_groups is not empty)"),
    F("system.iommu_groups", T.INT, "IOMMU groups"),
    F("system.uptime_s", T.NUMBER, "time since boot", unit="s"),
    F("system.cpu_virt_ext", T.TEXT, "hardware virtualisation (\"vmx\", \"svm\"); null when the CPU has none"),
    F("system.kvm_device", T.BOOL, "/dev/kvm exists (false on any kernel but Linux)"),
    F("system.default_target", T.TEXT, "systemd's boot target; not a sign of a desktop (systemd links "
      "`default.target` to `graphical.target` by default, so stock servers report it too)"),
    F("system.desktop_sessions", T.TEXTS, "session entries in /usr/share/xsessions and /usr/share/wayland-sessions, "
      "which desktop environments install (\"gnome\", \"plasma\"); empty on a server"),
    # ------------------------------------------------------------------ power
    F("power", T.OBJECT, "chassis, batteries and sleep"),
    F("power.chassis_type", T.TEXT, "the SMBIOS chassis, grouped", choices=CHASSIS),
    F("power.chassis_type_code", T.INT, "the SMBIOS chassis type code"),
    F("power.battery_present", T.BOOL, "a system battery is present"),
    F("power.on_ac", T.BOOL, "running on mains power"),
    F("power.batteries", T.LIST, "system batteries"),
    F("power.batteries.*.name", T.TEXT, "the power supply's name (\"BAT0\")"),
    F("power.batteries.*.capacity_pct", T.INT, "charge", unit="%"),
    F("power.batteries.*.status", T.TEXT, "\"Charging\", \"Discharging\", \"Full\", ..."),
    F("power.sleep_targets", T.MAP, "`systemctl is-enabled` of sleep.target, suspend.target, hibernate.target and "
      "hybrid-sleep.target"),
    F("power.sleep_targets.*", T.TEXT, "\"masked\", \"enabled\", \"static\", \"disabled\", ..."),
    # ------------------------------------------------------------------ storage
    F("storage", T.OBJECT, "filesystems, Docker's data root and swap"),
    F("storage.filesystems", T.LIST, "mounted local filesystems"),
    F("storage.filesystems.*.mountpoint", T.TEXT, "where it is mounted", redact="path"),
    F("storage.filesystems.*.device", T.TEXT, "the block device", redact="path"),
    F("storage.filesystems.*.fstype", T.TEXT, "\"ext4\", \"xfs\", ..."),
    F("storage.filesystems.*.size_gib", T.NUMBER, "size", unit="GiB"),
    F("storage.filesystems.*.free_gib", T.NUMBER, "free space", unit="GiB"),
    F("storage.filesystems.*.encrypted", T.BOOL, "on a dm-crypt (LUKS) device"),
    F("storage.filesystems.*.rotational", T.BOOL, "on a spinning disk"),
    F("storage.root", T.OBJECT, "the root filesystem"),
    F("storage.root.free_gib", T.NUMBER, "free space", unit="GiB"),
    F("storage.root.size_gib", T.NUMBER, "size", unit="GiB"),
    F("storage.root.fstype", T.TEXT, "filesystem type"),
    F("storage.root.encrypted", T.BOOL, "on a dm-crypt (LUKS) device"),
    F("storage.root.rotational", T.BOOL, "on a spinning disk"),
    F("storage.root.device", T.TEXT, "the block device", redact="path"),
    F("storage.home", T.OBJECT, "the filesystem that holds /home"),
    F("storage.home.mountpoint", T.TEXT, "its mount point", redact="path"),
    F("storage.home.encrypted", T.BOOL, "on a dm-crypt (LUKS) device"),
    F("storage.docker_root", T.OBJECT, "the filesystem of Docker's data root"),
    F("storage.docker_root.path", T.TEXT, "the data root dockerd uses", redact="path"),
    F("storage.docker_root.exists", T.BOOL, "the directory exists"),
    F("storage.docker_root.free_gib", T.NUMBER, "free space", unit="GiB"),
    F("storage.docker_root.size_gib", T.NUMBER, "size of the filesystem that holds it", unit="GiB"),
    F("storage.docker_root.fstype", T.TEXT, "filesystem type"),
    F("storage.docker_root.xfs_project_quota", T.BOOL, "XFS with project quotas (per-container disk limits)"),
    F("storage.docker_root.separate_mount", T.BOOL, "not on the root filesystem"),
    F("storage.docker_root.encrypted", T.BOOL, "on a dm-crypt (LUKS) device"),
    F("storage.docker_root.rotational", T.BOOL, "on a spinning disk"),
    F("storage.swap", T.LIST, "active swap devices and files"),
    F("storage.swap.*.device", T.TEXT, "the swap device or file", redact="path"),
    F("storage.swap.*.encrypted", T.BOOL, "encrypted swap"),
    F("storage.smart", T.OBJECT, "drive health from smartmontools (`smartctl --json`)"),
    F("storage.smart.drives", T.LIST, "one entry per drive `smartctl --scan` lists (at most 16); unknown without "
      "root, without smartctl, or when no drive has SMART data (virtio and Xen disks)"),
    F("storage.smart.drives.*.device", T.TEXT, "the device smartctl read (\"/dev/nvme0\")", redact="path"),
    F("storage.smart.drives.*.protocol", T.TEXT, "how smartctl talks to the drive", choices=("NVMe", "ATA", "SCSI")),
    F("storage.smart.drives.*.model", T.TEXT, "the drive's model name"),
    F("storage.smart.drives.*.emulated_by", T.TEXT, "the hypervisor whose emulated drive this is (its SMART data "
      "describes the emulation); null on a real drive"),
    F("storage.smart.drives.*.passed", T.BOOL, "the drive's own overall verdict (`smartctl -H`)"),
    F("storage.smart.drives.*.critical_warning", T.INT, "NVMe critical warning bits (0: none); null on other drives"),
    F("storage.smart.drives.*.available_spare", T.INT, "NVMe spare capacity left; null on other drives", unit="%"),
    F("storage.smart.drives.*.available_spare_threshold", T.INT, "the NVMe spare level the maker set as the point "
      "of concern; null on other drives", unit="%"),
    F("storage.smart.drives.*.percentage_used", T.INT, "NVMe estimate of rated endurance used (may pass 100); "
      "null on other drives", unit="%"),
    F("storage.smart.drives.*.media_errors", T.INT, "NVMe unrecovered media and data integrity errors; null on "
      "other drives"),
    F("storage.smart.drives.*.reallocated_sectors", T.INT, "ATA attribute 5 (Reallocated_Sector_Ct), raw; null on "
      "other drives"),
    F("storage.smart.drives.*.pending_sectors", T.INT, "ATA attribute 197 (Current_Pending_Sector), raw; null on "
      "other drives"),
    # ------------------------------------------------------------------ isolation
    F("isolation", T.OBJECT, "people, sessions and credentials on the machine"),
    F("isolation.graphical_session", T.BOOL, "a logind session of type x11/wayland, or an X/Wayland server running; "
      "on macOS, /dev/console owned by a user (a person logged in, not the login window)"),
    F("isolation.display_manager", T.TEXT, "gdm, sddm, lightdm ... enabled as display-manager.service, named in "
      "/etc/X11/default-display-manager, or running; null when none"),
    F("isolation.human_accounts", T.LIST, "accounts with uid >= 1000 and a real login shell"),
    F("isolation.human_accounts.*.name", T.TEXT, "account name", redact="user"),
    F("isolation.human_accounts.*.uid", T.INT, "uid"),
    F("isolation.human_accounts.*.home", T.TEXT, "home directory", redact="path"),
    F("isolation.human_accounts.*.shell", T.TEXT, "login shell"),
    F("isolation.docker_group_members", T.TEXTS, "members of the `docker` group", redact="users"),
    F("isolation.sudo_group_members", T.TEXTS, "members of sudo, wheel and admin", redact="users"),
    F("isolation.cloud_accounts", T.LIST, "the default accounts of cloud images present (ubuntu, debian, admin, "
      "ec2-user, ...), with what sudoers' rules name them by; ISO-1070 works out from `sudoers` what sudo grants "
      "them"),
    F("isolation.cloud_accounts.*.name", T.TEXT, "the account", redact="user"),
    F("isolation.cloud_accounts.*.uid", T.INT, "uid"),
    F("isolation.cloud_accounts.*.groups", T.TEXTS, "its groups"),
    F("isolation.cloud_accounts.*.gids", T.RAW, "the group ids it holds (numbers; sudoers' %#gid names them)"),
    F("isolation.sudoers", T.RAW, "the sudoers files as read, for ISO-1070 to work out what each cloud account may "
      "run as root: the shape of `agents.sudoers`; null when no default cloud account is present", redact="text"),
    F("isolation.credentials", T.LIST, "credential stores found in homes (presence only, never contents)"),
    F("isolation.credentials.*.kind", T.TEXT, "what it is",
      choices=("ssh_private_key", "aws", "azure", "gcloud", "browser_profile", "password_store", "kube")),
    F("isolation.credentials.*.user", T.TEXT, "whose it is", redact="user"),
    F("isolation.credentials.*.path", T.TEXT, "where it is", redact="path"),
    F("isolation.unreadable_homes", T.TEXTS, "homes that could not be read", redact="path"),
    F("isolation.apparmor_enabled", T.BOOL, "AppArmor is enabled"),
    # ------------------------------------------------------------------ docker
    F("docker", T.OBJECT, "the Docker daemon"),
    F("docker.reachable", T.BOOL, "the daemon answered"),
    F("docker.unreachable_reason", T.TEXT, "why not: \"absent\", \"permission_denied\", \"not_running\" or a message",
      redact="text"),
    F("docker.version", T.TEXT, "the engine's version"),
    F("docker.runtimes", T.TEXTS, "registered runtimes"),
    F("docker.default_runtime", T.TEXT, "the default runtime"),
    F("docker.nvidia_runtime", T.BOOL, "the NVIDIA runtime is registered"),
    F("docker.userns_remap", T.BOOL, "user namespace remapping on"),
    F("docker.rootless", T.BOOL, "a rootless daemon"),
    F("docker.seccomp", T.BOOL, "the seccomp profile on"),
    F("docker.apparmor", T.BOOL, "AppArmor confinement on"),
    F("docker.no_new_privileges", T.BOOL, "no-new-privileges by default"),
    F("docker.live_restore", T.BOOL, "containers survive a daemon restart"),
    F("docker.icc", T.BOOL, "containers on the default bridge may talk to each other"),
    F("docker.userland_proxy", T.BOOL, "published ports go through docker-proxy"),
    F("docker.data_root", T.TEXT, "the daemon's DockerRootDir, else decided as `storage.docker_root.path`",
      redact="path"),
    F("docker.published_ports", T.LIST, "ports containers publish on the host"),
    F("docker.published_ports.*.container", T.TEXT, "the container", redact="container"),
    F("docker.published_ports.*.host_ip", T.TEXT, "the host address it binds", redact="addr"),
    F("docker.published_ports.*.host_port", T.INT, "the host port"),
    F("docker.published_ports.*.proto", T.TEXT, "\"tcp\" or \"udp\""),
    F("docker.daemon_json", T.MAP, "the settings of /etc/docker/daemon.json named above (the daemon was not asked)",
      when="the daemon is not reachable"),
    F("docker.daemon_json.*", T.RAW, "one setting as written"),
    F("docker.containers", T.LIST, "running containers' host-level access"),
    F("docker.containers.*.name", T.TEXT, "the container's name", redact="container"),
    F("docker.containers.*.image", T.TEXT, "its image"),
    F("docker.containers.*.network_mode", T.TEXT, "\"host\", \"bridge\", \"container:ID\" (another container's "
      "network), ..."),
    F("docker.containers.*.host_network", T.BOOL, "on the host's own network stack: network mode \"host\", or "
      "\"container:ID\" where that container's mode ends on \"host\" (looked up through the API)"),
    F("docker.containers.*.privileged", T.BOOL, "runs privileged"),
    F("docker.containers.*.pid_mode", T.TEXT, "\"host\" shares the host's process namespace"),
    F("docker.containers.*.ipc_mode", T.TEXT, "\"host\" shares the host's IPC namespace"),
    F("docker.containers.*.host_mounts", T.TEXTS,
      "bind mounts that hand the container the host: /, /proc, /sys, /dev, /etc, /root, /home, /run, /var/run, "
      "the engine's data root, an engine socket such as /var/run/docker.sock, or a directory above one of them",
      redact="path"),
    # ------------------------------------------------------------------ agents
    F("agents", T.OBJECT, "provider agents and what they hold"),
    F("agents.installed", T.LIST, "each agent found"),
    F("agents.installed.*.id", T.TEXT, "the agent", choices=("vast", "salad", "ionet", "tensordock")),
    F("agents.installed.*.platform", T.TEXT, "the platform's name"),
    F("agents.installed.*.evidence", T.TEXTS, "what was found (\"account vastai_kaalia\", \"unit vastai.service\")",
      redact="text"),
    F("agents.installed.*.accounts", T.LIST, "its accounts"),
    F("agents.installed.*.accounts.*.name", T.TEXT, "account name", redact="user"),
    F("agents.installed.*.accounts.*.uid", T.INT, "uid"),
    F("agents.installed.*.accounts.*.shell", T.TEXT, "login shell"),
    F("agents.installed.*.accounts.*.groups", T.TEXTS, "its groups"),
    F("agents.installed.*.accounts.*.gids", T.RAW, "the group ids it holds (numbers; sudoers' %#gid names them)"),
    F("agents.installed.*.units", T.LIST, "its systemd units"),
    F("agents.installed.*.units.*.name", T.TEXT, "the unit"),
    F("agents.installed.*.units.*.present", T.BOOL, "the unit file is loaded"),
    F("agents.installed.*.units.*.enabled", T.TEXT, "systemd's UnitFileState (\"enabled\", \"masked\", ...)"),
    F("agents.installed.*.units.*.active", T.BOOL, "running"),
    F("agents.installed.*.units.*.active_state", T.TEXT, "systemd's ActiveState (\"active\", \"activating\", \"failed\", ...)"),
    F("agents.installed.*.units.*.sub_state", T.TEXT, "systemd's SubState (\"running\", \"auto-restart\", ...)"),
    F("agents.installed.*.units.*.result", T.TEXT, "systemd's Result of its last run (\"success\", \"exit-code\", ...)"),
    F("agents.installed.*.units.*.restarts", T.INT, "systemd's NRestarts: automatic restarts since it was last "
      "started by hand"),
    F("agents.installed.*.update_channel", T.TEXTS, "the agent's self-update scripts that exist"),
    F("agents.installed.*.packages", T.TEXTS, "the agent's dpkg packages that are installed"),
    F("agents.update_units", T.MAP, "UnitFileState of apt-daily.timer, apt-daily-upgrade.timer, apt-daily.service, "
      "apt-daily-upgrade.service and unattended-upgrades.service"),
    F("agents.update_units.*", T.TEXT, "\"enabled\", \"masked\", ...; \"not-found\" when the unit is absent"),
    F("agents.kernel_params", T.MAP, "the kernel parameters agents' installers set, found on /proc/cmdline "
      "(nvidia_drm.modeset, intel_iommu, amd_iommu, iommu, vfio-pci.ids, vfio_iommu_type1.allow_unsafe_interrupts)"),
    F("agents.kernel_params.*", T.TEXT, "the parameter's value"),
    F("agents.sudoers", T.RAW, "the sudoers files as read, for the checks to work out what each agent account may "
      "run as root: `root` and `hostname` (for %h includes), `files` (each `path` with its `text`, bounded, null when "
      "it does not exist, or why it is `unreadable`) and `dirs` (each include directory's `names`, or why it is "
      "`unreadable`); null when no agent account is present", redact="text"),
    F("agents.sudo_activity", T.OBJECT, "what agent accounts ran through sudo"),
    F("agents.sudo_activity.since", T.TIME, "from when (default the last 7 days; `--agent-since`)"),
    F("agents.sudo_activity.entries", T.INT, "sudo journal entries of agent accounts"),
    F("agents.sudo_activity.commands", T.LIST, "the 20 most frequent commands"),
    F("agents.sudo_activity.commands.*.user", T.TEXT, "who ran it", redact="user"),
    F("agents.sudo_activity.commands.*.command", T.TEXT, "the command (at most 200 characters)", redact="text"),
    F("agents.sudo_activity.commands.*.outcome", T.TEXT, "what sudo did", choices=("ran", "refused")),
    F("agents.sudo_activity.commands.*.count", T.INT, "how often"),
    # ------------------------------------------------------------------ ssh
    F("ssh", T.OBJECT, "the SSH server"),
    F("ssh.installed", T.BOOL, "sshd is installed"),
    F("ssh.running", T.BOOL, "sshd is running"),
    F("ssh.source", T.TEXT, "where the settings come from", choices=("sshd -T", "config files")),
    F("ssh.settings", T.MAP, "lower-case sshd keyword -> value"),
    F("ssh.settings.*", T.SETTING, "the value as sshd -T prints it", redact="sshd"),
    F("ssh.files_read", T.TEXTS, "configuration files in the order sshd reads them", redact="path"),
    F("ssh.origins", T.MAP, "lower-case sshd keyword -> the file whose value sshd keeps (the first it reads); "
      "unknown when a file could not be read"),
    F("ssh.origins.*", T.TEXT, "the file", redact="path"),
    F("ssh.socket_activated", T.BOOL, "ssh.socket starts sshd (Ubuntu 24.04's layout): the socket listens where its "
      "ListenStream says, and a change of sshd's configuration needs a restart of ssh.service, not a reload"),
    # ------------------------------------------------------------------ packages
    F("packages", T.OBJECT, "update policy and NVIDIA packages"),
    F("packages.unattended_upgrades", T.OBJECT, "unattended-upgrades"),
    F("packages.unattended_upgrades.installed", T.BOOL, "the package is installed"),
    F("packages.unattended_upgrades.enabled", T.BOOL, "APT::Periodic::Unattended-Upgrade \"1\""),
    F("packages.nvidia_packages", T.TEXTS, "installed packages matching nvidia, libnvidia, cuda-drivers"),
    F("packages.nvidia_held", T.TEXTS, "those on hold"),
    F("packages.nvidia_versions", T.OBJECT, "the NVIDIA driver's parts, which must be one version"),
    F("packages.nvidia_versions.kernel_module", T.TEXT, "the loaded kernel module (`/proc/driver/nvidia/version`)"),
    F("packages.nvidia_versions.library", T.TEXT, "the user-space NVML library programs load (libnvidia-ml.so.VERSION)"),
    F("packages.nvidia_versions.package", T.TEXT, "the installed package that ships it (libnvidia-ml1, "
      "libnvidia-compute-NNN), upstream version"),
    F("packages.reboot_required", T.OBJECT, "a reboot a package asked for (`/var/run/reboot-required`)"),
    F("packages.reboot_required.pending", T.BOOL, "the flag file exists"),
    F("packages.reboot_required.packages", T.TEXTS, "the packages that asked (`reboot-required.pkgs`, at most 50)"),
    F("packages.apt_sources", T.OBJECT, "APT sources (collector apt_sources)"),
    F("packages.apt_sources.sources", T.LIST, "binary `deb` sources from sources.list, *.list and deb822 *.sources"),
    F("packages.apt_sources.sources.*.type", T.TEXT, "\"deb\""),
    F("packages.apt_sources.sources.*.uri", T.TEXT, "the mirror", redact="uri"),
    F("packages.apt_sources.sources.*.suite", T.TEXT, "the suite (\"bookworm-security\")"),
    F("packages.apt_sources.security", T.LIST, "the sources that are a security suite (*-security, */updates, "
      "security.debian.org, security.ubuntu.com), with the fields of `sources`"),
    F("packages.apt_sources.security.*.type", T.TEXT, "\"deb\""),
    F("packages.apt_sources.security.*.uri", T.TEXT, "the mirror", redact="uri"),
    F("packages.apt_sources.security.*.suite", T.TEXT, "the suite"),
    # ------------------------------------------------------------------ network
    F(_NET, T.OBJECT, "interfaces, firewall, NAT and reachability"),
    F(f"{_NET}.interfaces", T.LIST, "network interfaces (collector network_local)"),
    F(f"{_NET}.interfaces.*.name", T.TEXT, "interface name", redact="iface"),
    F(f"{_NET}.interfaces.*.kind", T.TEXT, "what it is", choices=IFACE_KINDS),
    F(f"{_NET}.interfaces.*.up", T.BOOL, "the link is up"),
    F(f"{_NET}.interfaces.*.mac", T.TEXT, "hardware address", redact="mac"),
    F(f"{_NET}.interfaces.*.addresses", T.LIST, "its addresses"),
    F(f"{_NET}.interfaces.*.addresses.*.address", T.TEXT, "the address", redact="addr"),
    F(f"{_NET}.interfaces.*.addresses.*.family", T.INT, "4 or 6"),
    F(f"{_NET}.interfaces.*.addresses.*.prefixlen", T.INT, "prefix length", unit="bits"),
    F(f"{_NET}.interfaces.*.addresses.*.scope", T.TEXT, "what kind of address it is", choices=SCOPES),
    F(f"{_NET}.default_route", T.OBJECT, "the IPv4 default route; null when there is none"),
    F(f"{_NET}.default_route.interface", T.TEXT, "its interface", redact="iface"),
    F(f"{_NET}.default_route.gateway", T.TEXT, "its gateway", redact="addr"),
    F(f"{_NET}.default_route.kind", T.TEXT, "the interface's kind", choices=IFACE_KINDS),
    F(f"{_NET}.default_route.speed_mbps", T.INT, "its negotiated link speed in Mb/s (sysfs `speed`)"),
    F(f"{_NET}.default_route.duplex", T.TEXT, "its negotiated duplex (sysfs `duplex`)", choices=("full", "half")),
    F(f"{_NET}.default_route.addressing", T.TEXT, "how its interface's IPv4 address is assigned, from the network "
      "manager's own lease or configuration", choices=("dhcp", "static")),
    F(f"{_NET}.default_route.addressing_from", T.TEXT, "where that was read (\"systemd-networkd's lease\", "
      "\"NetworkManager's DHCP lease\", \"dhclient's lease\", \"ifupdown's /etc/network/interfaces\", ...)"),
    F(f"{_NET}.ipv6_global", T.BOOL, "an interface has a global IPv6 address"),
    F(f"{_NET}.listening", T.LIST, "listening sockets, never the audit's own probes"),
    F(f"{_NET}.listening.*.proto", T.TEXT, "\"tcp\" or \"udp\""),
    F(f"{_NET}.listening.*.address", T.TEXT, "the bound address", redact="addr"),
    F(f"{_NET}.listening.*.port", T.INT, "the port"),
    F(f"{_NET}.listening.*.process", T.TEXT, "the owning process", redact="text"),
    F(f"{_NET}.listening.*.exposure", T.TEXT, "who can reach it", choices=("loopback", "all", "specific")),
    F(f"{_NET}.firewall", T.OBJECT, "the ruleset as recorded evidence (root only)"),
    F(f"{_NET}.firewall.nftables", T.RAW, "the items of `nft -j list ruleset` the judgement reads, each with only "
      "`table` {family, name}, `chain` {family, table, name, type, hook, prio, policy}, `rule` {family, table, chain, "
      "expr} or `set` {family, table, name, type, elem} (no handles, comments or maps); null when nft could not be "
      "run; unknown when it failed or the ruleset is over the bound (20,000 items, 10,000 elements in a set)"),
    F(f"{_NET}.firewall.iptables", T.OBJECT, "the legacy iptables rules, read only when nftables holds no table "
      "(they do not show in nft's ruleset); null when not read or iptables-save could not be run"),
    F(f"{_NET}.firewall.iptables.filter", T.TEXTS, "the filter table's `:CHAIN POLICY` and `-A` lines of "
      "iptables-save, rule comments removed (at most 20,000)"),
    F(f"{_NET}.firewall.iptables.rule_count", T.INT, "rules in all tables"),
    F(f"{_NET}.route_localnet", T.MAP, "route_localnet of each container bridge (collector container_egress; "
      "readable without root): 1 lets packets to 127.0.0.0/8 arriving on the bridge reach services listening only "
      "on the host's loopback (dockerd sets it when `userland-proxy` is off)"),
    F(f"{_NET}.route_localnet.*", T.INT, "0 or 1"),
    F(f"{_NET}.route_localnet_all", T.INT, "net.ipv4.conf.all.route_localnet (collector container_egress; readable "
      "without root), 0 or 1: the kernel ORs it with each interface's own value, so 1 routes loopback-addressed "
      "packets from every bridge"),
    F(f"{_NET}.container_egress", T.OBJECT, "container bridges, for the ISO-1040 walk (collector container_egress; "
      "root only)"),
    F(f"{_NET}.container_egress.bridges", T.TEXTS, "container bridges found (docker0, br-*, cni*, nerdctl*, podman*)"),
    F(f"{_NET}.container_egress.bridges_v6", T.TEXTS, "those with a non-link-local IPv6 address"),
    F(f"{_NET}.container_egress.legacy_iptables_tables", T.TEXTS,
      "legacy iptables tables loaded, whose rules nft does not list (\"ip filter\")"),
    F(f"{_NET}.nat", T.OBJECT, "NAT behaviour from STUN (RFC 5780)"),
    F(f"{_NET}.nat.mapping", T.TEXT, "how the NAT maps a socket's address (\"endpoint-dependent\": changes with the "
      "destination, where without RFC 5780 the port's part is not told apart)", choices=NAT_WORDS),
    F(f"{_NET}.nat.filtering", T.TEXT, "which inbound packets the NAT lets through", choices=NAT_WORDS),
    F(f"{_NET}.nat.mapping_method", T.TEXT, "how mapping was told: \"rfc5780\", or \"two-servers\" (the mapped "
      "addresses two servers saw for one socket); null when not"),
    F(f"{_NET}.nat.mapped_address", T.TEXT, "the public address STUN saw", redact="addr"),
    F(f"{_NET}.nat.mapped_port", T.INT, "the public port STUN saw"),
    F(f"{_NET}.nat.mapped_address_v6", T.TEXT, "the IPv6 address STUN saw", redact="addr"),
    F(f"{_NET}.nat.local_address", T.TEXT, "the local address of the probe socket", redact="addr"),
    F(f"{_NET}.nat.other_address", T.TEXT, "the server's RFC 5780 alternate address", redact="addr"),
    F(f"{_NET}.nat.server", T.TEXT, "the server the behaviour tests ran against (the first that answered with "
      "OTHER-ADDRESS)", redact="host"),
    F(f"{_NET}.nat.hairpinning", T.BOOL, "the NAT loops a packet to its own public address back in"),
    F(f"{_NET}.nat.reason", T.TEXT, "why something is unknown", redact="text"),
    F(f"{_NET}.nat.packets_sent", T.INT, "STUN packets sent"),
    F(f"{_NET}.nat.duration_s", T.NUMBER, "how long the tests took", unit="s"),
    F(f"{_NET}.nat.tests", T.RAW, "each test's raw result"),
    F(f"{_NET}.path", T.OBJECT, "the raw evidence the NAT checks judge (kept uninterpreted)"),
    F(f"{_NET}.path.public_ranges", T.TEXTS, "what this run counted as public (`--public-range`)"),
    F(f"{_NET}.path.local_ipv4", T.TEXT, "the address this host sends from towards the IPv4 internet; null when "
      "there is no IPv4 route", redact="addr"),
    F(f"{_NET}.path.local_ipv4_reason", T.TEXT, "why there is none", redact="text"),
    F(f"{_NET}.path.local_ipv6", T.TEXT, "the global IPv6 source address, or null", redact="addr"),
    F(f"{_NET}.path.ipv6_failure", T.TEXT, "why there is none", redact="text"),
    F(f"{_NET}.path.stun", T.LIST, "every IPv4 STUN server, asked from the same socket"),
    F(f"{_NET}.path.stun.*.server", T.TEXT, "the server", redact="host"),
    F(f"{_NET}.path.stun.*.local", T.TEXT, "the local address used", redact="addr"),
    F(f"{_NET}.path.stun.*.mapped", T.TEXT, "\"ip:port\" it saw, or null", redact="addr"),
    F(f"{_NET}.path.stun.*.other_address", T.TEXT, "its RFC 5780 alternate address", redact="addr"),
    F(f"{_NET}.path.stun.*.error", T.TEXT, "why it did not answer", redact="text"),
    F(f"{_NET}.path.stun_failure", T.TEXT, "why STUN failed as a whole", redact="text"),
    F(f"{_NET}.path.stun_ipv6", T.OBJECT, "the IPv6 STUN answer, or null"),
    F(f"{_NET}.path.stun_ipv6.server", T.TEXT, "the server", redact="host"),
    F(f"{_NET}.path.stun_ipv6.local", T.TEXT, "the local address used", redact="addr"),
    F(f"{_NET}.path.stun_ipv6.mapped", T.TEXT, "what it saw", redact="addr"),
    F(f"{_NET}.path.stun_ipv6.error", T.TEXT, "why it did not answer", redact="text"),
    F(f"{_NET}.path.hops", T.LIST, "TTL-limited UDP towards the first server"),
    F(f"{_NET}.path.hops.*.ttl", T.INT, "the hop's TTL"),
    F(f"{_NET}.path.hops.*.address", T.TEXT, "who answered", redact="addr"),
    F(f"{_NET}.path.hops.*.reached", T.BOOL, "the destination itself answered"),
    F(f"{_NET}.path.router_upnp", T.OBJECT, "what the router said over UPnP"),
    F(f"{_NET}.path.router_upnp.address", T.TEXT, "the WAN address it reported, or null", redact="addr"),
    F(f"{_NET}.path.router_upnp.detail", T.TEXT, "what happened", redact="text"),
    F(f"{_NET}.path.router_natpmp", T.OBJECT, "what the router said over NAT-PMP"),
    F(f"{_NET}.path.router_natpmp.address", T.TEXT, "the WAN address it reported, or null", redact="addr"),
    F(f"{_NET}.path.router_natpmp.detail", T.TEXT, "what happened", redact="text"),
    F(f"{_NET}.cgnat", T.OBJECT, "CGNAT as judged when collected (the checks judge `path` again)"),
    F(f"{_NET}.cgnat.verdict", T.TEXT, "behind carrier-grade NAT; one heuristic alone never gives \"yes\", \"no\" "
      "needs positive evidence", choices=TRISTATE),
    F(f"{_NET}.cgnat.double_nat", T.TEXT, "behind two NATs", choices=TRISTATE),
    F(f"{_NET}.cgnat.signals", T.LIST, "the evidence"),
    F(f"{_NET}.cgnat.signals.*.name", T.TEXT, "the signal",
      choices=("stun_mapped_address", "local_address", "router_upnp", "router_natpmp", "hop_probe", "servers_agree",
               "ipv6")),
    F(f"{_NET}.cgnat.signals.*.result", T.TEXT, "what it says"),
    F(f"{_NET}.cgnat.signals.*.evidence", T.TEXT, "what was seen", redact="text"),
    F(f"{_NET}.inbound", T.OBJECT, "ports reached from outside (\"unverified\" unless a `--probe` server connected "
      "back)"),
    F(f"{_NET}.inbound.probed", T.BOOL, "a probe server was asked"),
    F(f"{_NET}.inbound.peer", T.TEXT, "the address the probe server saw (an IPv6 peer means the ports were reached "
      "over IPv6 and count as no IPv4 port)", redact="addr"),
    F(f"{_NET}.inbound.ports", T.LIST, "each port asked for"),
    F(f"{_NET}.inbound.ports.*.port", T.INT, "the port"),
    F(f"{_NET}.inbound.ports.*.proto", T.TEXT, "\"tcp\" or \"udp\""),
    F(f"{_NET}.inbound.ports.*.result", T.TEXT, "whether the probe reached this host", choices=INBOUND),
    F(f"{_NET}.inbound.ports.*.detail", T.TEXT, "what the server said", redact="text"),
    F(f"{_NET}.inbound.reason", T.TEXT, "why nothing was probed", redact="text"),
    F(f"{_NET}.inbound.seen_from", T.TEXT, "where the probe server reached this host from: \"inside\" when the "
      "address it saw is private (hairpin NAT or the same network), which proves nothing about outside",
      choices=("outside", "inside")),
    F(f"{_NET}.port_range", T.OBJECT, "the port range the provider agent forwards to renters: the agent's "
      "`/var/lib/vastai_kaalia/host_port_range`, else `--port-range`"),
    F(f"{_NET}.port_range.first", T.INT, "its first port"),
    F(f"{_NET}.port_range.last", T.INT, "its last port"),
    F(f"{_NET}.port_range.count", T.INT, "how many ports it holds"),
    F(f"{_NET}.port_range.source", T.TEXT, "where it was read", choices=("agent", "owner")),
    F(f"{_NET}.bandwidth", T.OBJECT, "the speed test against the probe server",
      when="`hostcheck audit --speedtest --probe URL`"),
    F(f"{_NET}.bandwidth.measured", T.BOOL, "both directions were measured"),
    F(f"{_NET}.bandwidth.download_mbps", T.NUMBER, "TCP payload rate of all streams together after the warm-up, from "
      "the kernel's per-socket counters; null where not measured", unit="Mbps"),
    F(f"{_NET}.bandwidth.upload_mbps", T.NUMBER, "the same, upwards", unit="Mbps"),
    F(f"{_NET}.bandwidth.latency_ms", T.NUMBER, "median TCP handshake time to the server", unit="ms"),
    F(f"{_NET}.bandwidth.jitter_ms", T.NUMBER, "mean change between handshakes", unit="ms"),
    F(f"{_NET}.bandwidth.source", T.TEXT, "\"probe-server\""),
    F(f"{_NET}.bandwidth.server", T.TEXT, "scheme://host:port", redact="host"),
    F(f"{_NET}.bandwidth.streams", T.INT, "parallel TCP streams per direction"),
    F(f"{_NET}.bandwidth.bytes_down", T.INT, "everything moved down, warm-up included", unit="bytes"),
    F(f"{_NET}.bandwidth.bytes_up", T.INT, "everything moved up, warm-up included", unit="bytes"),
    F(f"{_NET}.bandwidth.byte_cap_reached", T.BOOL, "the byte cap ended the test"),
    F(f"{_NET}.bandwidth.duration_s", T.NUMBER, "how long it took", unit="s"),
    F(f"{_NET}.bandwidth.caps", T.OBJECT, "the caps it ran under"),
    F(f"{_NET}.bandwidth.caps.seconds", T.NUMBER, "time cap", unit="s"),
    F(f"{_NET}.bandwidth.caps.bytes", T.INT, "byte cap, both directions", unit="bytes"),
    F(f"{_NET}.bandwidth.warmup_s", T.NUMBER, "warm-up left out of the rates", unit="s"),
    F(f"{_NET}.bandwidth.reason", T.TEXT, "why a direction was not measured, else null", redact="text"),
    # ------------------------------------------------------------------ watch
    F("watch", T.OBJECT, "the reliability recording"),
    F("watch.present", T.BOOL, "a watch database was there and readable"),
    F("watch.path", T.TEXT, "the database", redact="path"),
    F("watch.reason", T.TEXT, "why not, else null", redact="text"),
    F("watch.window_start", T.TIME, "the window's start", when="a database was read"),
    F("watch.window_end", T.TIME, "the window's end", when="a database was read"),
    F("watch.observed_days", T.NUMBER, "up plus down time; stretches the recorder did not run are left out",
      unit="days", when="a database was read"),
    F("watch.not_recorded_days", T.NUMBER, "stretches nothing was recorded", unit="days", when="a database was read"),
    F("watch.uptime_pct", T.NUMBER, "up time over observed time", unit="%", when="a database was read"),
    F("watch.segments", T.LIST, "the window as consecutive stretches of one state, oldest first (at most 4096), "
      "which the REL checks apply each platform's rule to", when="a database was read"),
    F("watch.segments.*.state", T.TEXT, "up, why down, or not recorded (the recorder did not run)",
      choices=("up", "power", "reboot", "network", "driver", "suspend", "not recorded")),
    F("watch.segments.*.start", T.NUMBER, "its start, seconds since the Unix epoch", unit="s"),
    F("watch.segments.*.end", T.NUMBER, "its end, seconds since the Unix epoch", unit="s"),
    F("watch.current_up_h", T.NUMBER, "the up run that reaches the end of the window", unit="h",
      when="a database was read"),
    F("watch.longest_up_h", T.NUMBER, "the longest up run", unit="h", when="a database was read"),
    F("watch.outages", T.LIST, "outages in the window", when="a database was read"),
    F("watch.outages.*.cause", T.TEXT, "why", choices=("power", "reboot", "network", "driver", "suspend")),
    F("watch.outages.*.start", T.TIME, "when it started"),
    F("watch.outages.*.minutes", T.NUMBER, "how long", unit="min"),
    F("watch.unclean_stops", T.INT, "boots that ended without a shutdown record", when="a database was read"),
    F("watch.gpu_faults", T.LIST, "GPU faults that need a reboot or point at hardware, by NVIDIA's Xid catalogue "
      "(at most 50)", when="a database was read"),
    F("watch.gpu_faults.*.kind", T.TEXT, "the kernel log line's kind", choices=("xid", "aer")),
    F("watch.gpu_faults.*.code", T.INT, "Xid code, or null"),
    F("watch.gpu_faults.*.severity", T.TEXT, "AER severity, or null"),
    F("watch.gpu_faults.*.at", T.TIME, "when"),
    F("watch.gpu_faults.*.needs_reboot", T.BOOL, "NVIDIA's Xid catalogue's immediate action is a GPU reset or a reboot "
      "(the GPU is out of service until then)"),
    F("watch.gpu_faults.*.hardware", T.BOOL, "the catalogue points at hardware"),
)


def _expand(facts: tuple[Fact, ...]) -> dict[str, Fact]:
    """Path -> fact, with the children of counters and windows declared."""
    out: dict[str, Fact] = {}
    for fact in facts:
        if fact.path in out:
            raise ValueError(f"fact {fact.path} declared twice")
        out[fact.path] = fact
        if fact.type is FactType.LIST:
            out[f"{fact.path}.*"] = Fact(f"{fact.path}.*", FactType.OBJECT, "one entry")
        forms = {FactType.COUNTER: COUNTER_FIELDS, FactType.WINDOW: WINDOW_FIELDS}.get(fact.type, ())
        for name, kind, meaning in forms:
            out[f"{fact.path}.{name}"] = Fact(f"{fact.path}.{name}", kind, meaning, unit=fact.unit if name == "total" else "")
    for path in out:
        parent = path.rpartition(".")[0]
        if parent and parent not in out:
            raise ValueError(f"fact {path} has no declared parent {parent}")
    return out


TABLE: dict[str, Fact] = _expand(FACTS)
"""Every declared path (containers and leaves) -> its fact."""

_CONTAINERS = (FactType.OBJECT, FactType.LIST, FactType.MAP, FactType.COUNTER, FactType.WINDOW)
DECLARED: frozenset[str] = frozenset(p for p, f in TABLE.items() if f.type not in _CONTAINERS)
"""The leaves: paths that hold a value."""

KINDS: dict[str, str] = {path: fact.redact for path, fact in TABLE.items() if fact.redact}
"""Redaction kind per declared path."""


def children(path: str) -> dict[str, Fact]:
    """Name -> fact of the declared children of ``path`` (``*`` for a list's item or a map's value)."""
    prefix = f"{path}."
    return {p[len(prefix):]: f for p, f in TABLE.items() if p.startswith(prefix) and "." not in p[len(prefix):]}


def fields(path: str) -> tuple[str, ...]:
    """The field names a collector writes under ``path`` (a list's item: ``gpu.devices.*``)."""
    return tuple(children(path))


def _generic(path: str) -> str:
    """gpu.devices.0.name -> gpu.devices.*.name; a key under a map -> *."""
    out: list[str] = []
    for part in path.split("."):
        here = ".".join([*out, part])
        star = ".".join([*out, "*"])
        if here in TABLE:
            out.append(part)
        elif star in TABLE:
            out.append("*")
        else:
            out.append(part)
    return ".".join(out)


@cache
def is_declared(path: str) -> bool:
    return _generic(path) in TABLE


def check_declared(path: str) -> None:
    if not is_declared(path):
        raise UndeclaredFact(f"fact path {path!r} is not declared in hostcheck/fact_paths.py")


def declared_child(path: str, key: str) -> tuple[str, bool]:
    """The declared path of ``key`` under ``path`` (``*`` where the data chooses the key), and
    whether the key is data (chosen by the data or not declared at all) rather than a name."""
    child = f"{path}.{key}" if path else key
    if child in TABLE:
        return child, False
    if path and f"{path}.*" in TABLE and TABLE[path].type is FactType.MAP:
        return f"{path}.*", True
    if path and f"{path}.*" in TABLE:
        return f"{path}.*", True
    return child, True
