"""The reliability rehearsal recorder and the platforms' rules, a library for `hostcheck watch`
(hostcheck.commands.watch) and the audit's REL checks. The recording's database and its
analysis are hostcheck.recording; the report's text is hostcheck.render.watch.

probes     network reachability samples (TCP connect, DNS) to several targets
journal    boots, shutdown records and kernel lines from the systemd journal
xid        NVIDIA Xid and PCIe AER classification (the catalogue is data: xid_catalog.yaml)
pkglog     changes of hosting-critical packages from dpkg's log
power      the power source (battery machines) and UPS status from NUT
drift      what drifts: LAN address, gateway, DHCP, link, NVIDIA driver parts, reboot, agent restarts
traffic    the network bytes a minute the settings cost (measured per exchange) and the bound
recorder   the sampling loop
rules      each platform's published reliability rule (data: platform_rules.yaml)
"""
