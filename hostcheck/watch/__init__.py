"""The reliability rehearsal recorder and the platforms' rules, a library for `hostcheck watch`
(hostcheck.commands.watch) and the audit's REL checks. The recording's database and its
analysis are hostcheck.recording; the report's text is hostcheck.render.watch.

probes        network reachability samples (TCP connect, DNS) to several targets
journal       boots, shutdown records and kernel lines from the systemd journal; its readability
xid           NVIDIA Xid and PCIe AER classification (the catalogue is data: xid_catalog.yaml)
sampler       what the recorder's samplers share: the sample's moment (Tick), where they write (Sink)
clockjumps    suspends and wall-clock steps between samples
boots         the running boot's id and the journal's boots, written at start-up
kernel_lines  new Xid and AER lines from the journal; the GPU taken out of service
pkglog        changes of hosting-critical packages from dpkg's log
gpu           the GPUs through NVML: readings, violation counters, ECC, throttling
stun          the public address and the CGNAT re-check (STUN)
power         the power source (battery machines) and UPS status from NUT
inbound       the forwarded ports, checked through the owner's probe server
drift         what drifts: LAN address, gateway, DHCP, link, NVIDIA driver parts, reboot, agent restarts
traffic       the network bytes a minute the settings cost (measured per exchange) and the bound
recorder      the sampling loop: the schedule, the sample, the events' writing, start and stop
rules         each platform's published reliability rule (data: platform_rules.yaml)
"""
