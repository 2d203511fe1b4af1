"""The declared facts layout: every dotted path a collector writes and a check may read.

``docs/facts.md`` documents each of these (a test holds the two together), and
:func:`hostcheck.facts.lookup` refuses a path that is not declared here, so a misspelt path in
a check is an ``error`` finding and a failing table test, never a quiet ``unknown``.

``*`` stands for a list index or a key chosen by the data (a sshd keyword, a systemd target);
the parents of a declared path are declared too.

``PATH=KIND`` also says what the value is, for ``--redact`` (:mod:`hostcheck.redact`): ``host``
(a host name, or HOST:PORT), ``addr`` (an address, maybe with a port, zone or prefix length),
``user`` / ``users`` (account names; ``users``: a list of them), ``path`` (a file or device path,
a remote mount source), ``mac``, ``iface`` (an interface name), ``serial``, ``uuid``,
``container``, ``uri``, ``sshd`` (an sshd setting, by keyword), ``text`` (free text: every
identifier in it goes, the host's name included). A path without a kind (and its children) is a
value the checks compare (``system.os_id``, a GPU model name, a verdict word): only what is
shaped like an identifier (an address, a MAC, a UUID, a home path, URL credentials) is replaced
there, never a learned name. A kind declared on a parent covers its children.
"""

from __future__ import annotations

from functools import cache

_DECLARED = """
meta.facts_format meta.hostcheck_version meta.hostname=host meta.collected_at meta.offline meta.duration_s
meta.collector_timings_s.* meta.source meta.description=text

gpu.nvml.available gpu.nvml.reason=text gpu.driver_version gpu.cuda_driver_version gpu.nvml_version
gpu.devices.*.index gpu.devices.*.name gpu.devices.*.uuid=uuid gpu.devices.*.serial=serial gpu.devices.*.pci_bus_id
gpu.devices.*.vram_total_mib gpu.devices.*.vram_used_mib
gpu.devices.*.power_limit_w gpu.devices.*.power_default_w gpu.devices.*.power_min_w gpu.devices.*.power_max_w
gpu.devices.*.power_draw_w gpu.devices.*.temperature_c gpu.devices.*.slowdown_temp_c
gpu.devices.*.pcie_gen_current gpu.devices.*.pcie_gen_max gpu.devices.*.pcie_width_current
gpu.devices.*.pcie_width_max gpu.devices.*.ecc_enabled gpu.devices.*.persistence_mode
gpu.devices.*.display_active gpu.devices.*.throttle_reasons gpu.devices.*.mig_mode gpu.devices.*.is_laptop
gpu.devices.*.laptop_evidence=text gpu.devices.*.architecture gpu.devices.*.compute_capability
gpu.display_adapters.*.pci_address gpu.display_adapters.*.vendor_id gpu.display_adapters.*.vendor
gpu.display_adapters.*.device_id gpu.display_adapters.*.driver

system.cpu_model system.cpu_arch system.os_kernel_name system.cpu_physical_cores system.cpu_logical_cores
system.cpu_avx system.ram_total_mib system.os_id system.os_version_id system.os_pretty system.kernel
system.virtualization system.secure_boot system.iommu_enabled system.iommu_groups system.uptime_s
system.cpu_virt_ext system.kvm_device system.default_target system.desktop_sessions

power.chassis_type power.chassis_type_code power.battery_present power.on_ac
power.batteries.*.name power.batteries.*.capacity_pct power.batteries.*.status power.sleep_targets.*

storage.filesystems.*.mountpoint=path storage.filesystems.*.device=path storage.filesystems.*.fstype
storage.filesystems.*.size_gib storage.filesystems.*.free_gib storage.filesystems.*.encrypted
storage.filesystems.*.rotational
storage.root.free_gib storage.root.size_gib storage.root.fstype storage.root.encrypted storage.root.rotational
storage.root.device=path storage.home.mountpoint=path storage.home.encrypted
storage.docker_root.path=path storage.docker_root.exists storage.docker_root.free_gib storage.docker_root.fstype
storage.docker_root.xfs_project_quota storage.docker_root.separate_mount storage.docker_root.encrypted
storage.docker_root.rotational storage.swap.*.device=path storage.swap.*.encrypted

isolation.graphical_session isolation.display_manager
isolation.human_accounts.*.name=user isolation.human_accounts.*.uid isolation.human_accounts.*.home=path
isolation.human_accounts.*.shell isolation.docker_group_members=users isolation.sudo_group_members=users
isolation.credentials.*.kind isolation.credentials.*.user=user isolation.credentials.*.path=path
isolation.unreadable_homes=path isolation.apparmor_enabled

docker.reachable docker.unreachable_reason=text docker.version docker.runtimes docker.default_runtime
docker.nvidia_runtime docker.userns_remap docker.rootless docker.seccomp docker.apparmor
docker.no_new_privileges docker.live_restore docker.icc docker.userland_proxy docker.data_root=path
docker.published_ports.*.container=container docker.published_ports.*.host_ip=addr docker.published_ports.*.host_port
docker.published_ports.*.proto docker.daemon_json.*
docker.containers.*.name=container docker.containers.*.network_mode docker.containers.*.privileged
docker.containers.*.image docker.containers.*.pid_mode docker.containers.*.ipc_mode docker.containers.*.host_mounts=path

agents.installed.*.id agents.installed.*.platform agents.installed.*.evidence=text
agents.installed.*.accounts.*.name=user agents.installed.*.accounts.*.uid agents.installed.*.accounts.*.shell
agents.installed.*.accounts.*.groups agents.installed.*.accounts.*.sudo.scope
agents.installed.*.accounts.*.sudo.rules.*.file=path agents.installed.*.accounts.*.sudo.rules.*.line
agents.installed.*.accounts.*.sudo.rules.*.rule=text agents.installed.*.accounts.*.sudo.rules.*.nopasswd
agents.installed.*.accounts.*.sudo.rules.*.commands=text agents.installed.*.accounts.*.sudo.root_giving
agents.installed.*.accounts.*.sudo.io_logging agents.installed.*.accounts.*.sudo.syslog
agents.installed.*.accounts.*.sudo.logfile=path agents.installed.*.accounts.*.sudo.files_read=path
agents.installed.*.accounts.*.sudo.unreadable=text agents.installed.*.accounts.*.sudo.unparsed_lines=text
agents.installed.*.units.*.name agents.installed.*.units.*.present agents.installed.*.units.*.enabled
agents.installed.*.units.*.active agents.installed.*.update_channel agents.installed.*.packages
agents.update_units.* agents.kernel_params.*
agents.sudo_activity.since agents.sudo_activity.entries agents.sudo_activity.commands.*.user=user
agents.sudo_activity.commands.*.command=text agents.sudo_activity.commands.*.outcome agents.sudo_activity.commands.*.count

ssh.installed ssh.running ssh.source ssh.settings.*=sshd ssh.files_read=path

packages.unattended_upgrades.installed packages.unattended_upgrades.enabled packages.nvidia_packages
packages.nvidia_held packages.apt_sources.sources.*.type packages.apt_sources.sources.*.uri=uri
packages.apt_sources.sources.*.suite packages.apt_sources.security

network.interfaces.*.name=iface network.interfaces.*.kind network.interfaces.*.up network.interfaces.*.mac=mac
network.interfaces.*.addresses.*.address=addr network.interfaces.*.addresses.*.family
network.interfaces.*.addresses.*.prefixlen network.interfaces.*.addresses.*.scope
network.default_route.interface=iface network.default_route.gateway=addr network.default_route.kind
network.ipv6_global
network.listening.*.proto network.listening.*.address=addr network.listening.*.port network.listening.*.process=text
network.listening.*.exposure
network.firewall.backend network.firewall.readable network.firewall.input_policy network.firewall.forward_policy
network.firewall.rule_count network.firewall.docker_user_chain_filters
network.firewall.nftables network.firewall.iptables.filter network.firewall.iptables.rule_count
network.container_egress.bridges_v6 network.container_egress.legacy_iptables_tables
network.container_egress.bridges network.container_egress.bridges_assumed
network.container_egress.probes.*.name network.container_egress.probes.*.destination=addr
network.container_egress.probes.*.interface=iface network.container_egress.probes.*.verdict
network.container_egress.probes.*.evidence=text
network.route_localnet.*
network.nat.mapping network.nat.filtering network.nat.mapping_method network.nat.mapped_address=addr
network.nat.mapped_port network.nat.mapped_address_v6=addr network.nat.local_address=addr network.nat.other_address=addr
network.nat.server=host network.nat.hairpinning network.nat.reason=text network.nat.packets_sent network.nat.duration_s
network.nat.tests
network.path.public_ranges network.path.local_ipv4=addr network.path.local_ipv4_reason=text network.path.local_ipv6=addr
network.path.ipv6_failure=text network.path.stun.*.server=host network.path.stun.*.local=addr network.path.stun.*.mapped=addr
network.path.stun.*.other_address=addr network.path.stun.*.error=text network.path.stun_failure=text
network.path.stun_ipv6.server=host network.path.stun_ipv6.local=addr network.path.stun_ipv6.mapped=addr
network.path.stun_ipv6.error=text network.path.hops.*.ttl network.path.hops.*.address=addr network.path.hops.*.reached
network.path.router_upnp.address=addr network.path.router_upnp.detail=text
network.path.router_natpmp.address=addr network.path.router_natpmp.detail=text
network.cgnat.verdict network.cgnat.double_nat network.cgnat.signals.*.name network.cgnat.signals.*.result
network.cgnat.signals.*.evidence=text
network.inbound.probed network.inbound.peer=addr network.inbound.ports.*.port network.inbound.ports.*.proto
network.inbound.ports.*.result network.inbound.ports.*.detail=text network.inbound.reason=text
network.bandwidth.measured network.bandwidth.download_mbps network.bandwidth.upload_mbps
network.bandwidth.latency_ms network.bandwidth.jitter_ms network.bandwidth.source network.bandwidth.server=host
network.bandwidth.streams network.bandwidth.bytes_down network.bandwidth.bytes_up
network.bandwidth.byte_cap_reached network.bandwidth.duration_s network.bandwidth.caps.seconds
network.bandwidth.caps.bytes network.bandwidth.warmup_s network.bandwidth.reason=text

watch.present watch.path=path watch.reason=text watch.window_start watch.window_end watch.observed_days
watch.not_recorded_days watch.uptime_pct watch.runpod_score_pct watch.current_up_h watch.longest_up_h
watch.outages.*.cause watch.outages.*.start watch.outages.*.minutes watch.unclean_stops
watch.gpu_faults.*.kind watch.gpu_faults.*.code watch.gpu_faults.*.severity watch.gpu_faults.*.at
watch.gpu_faults.*.needs_reboot watch.gpu_faults.*.hardware
"""

DECLARED: frozenset[str] = frozenset(token.partition("=")[0] for token in _DECLARED.split())
"""The leaves as written above."""

KINDS: dict[str, str] = {path: kind for path, _, kind in (t.partition("=") for t in _DECLARED.split()) if kind}
"""Redaction kind per declared path (``PATH=KIND`` above)."""


class UndeclaredFact(LookupError):
    """A fact path no collector declares: a programming error (a typo, or a fact added to a
    collector without declaring and documenting it), never "not collected"."""


@cache
def _all_paths() -> frozenset[str]:
    out: set[str] = set()
    for path in DECLARED:
        parts = path.split(".")
        out.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return frozenset(out)


@cache
def is_declared(path: str) -> bool:
    parts = ["*" if part.isdigit() else part for part in path.split(".")]
    known = _all_paths()
    if ".".join(parts) in known:
        return True
    # A key chosen by the data (ssh.settings.port) matches the declared wildcard.
    return any(".".join([*parts[:i], "*", *parts[i + 1:]]) in known for i in range(len(parts)))


def check_declared(path: str) -> None:
    if not is_declared(path):
        raise UndeclaredFact(f"fact path {path!r} is not declared in hostcheck/fact_paths.py (nor documented in docs/facts.md)")


def declared_child(path: str, key: str) -> tuple[str, bool]:
    """The declared path of ``key`` under ``path`` (``*`` where the data chooses the key), and
    whether the key is data (chosen by the data or not declared at all) rather than a name."""
    child = f"{path}.{key}" if path else key
    known = _all_paths()
    if child in known:
        return child, False
    if path and f"{path}.*" in known:
        return f"{path}.*", True
    return child, True
