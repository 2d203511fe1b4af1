"""`hostcheck watch`: a reliability rehearsal recorder and its report.

store      the SQLite database (the only module that writes it)
probes     network reachability samples (TCP connect, DNS) to several targets
journal    boots, shutdown records and kernel lines from the systemd journal
xid        NVIDIA Xid and PCIe AER classification (the catalogue is data: xid_catalog.yaml)
pkglog     changes of hosting-critical packages from dpkg's log
power      the power source (battery machines) and UPS status from NUT
traffic    the network bytes a minute the settings cost (measured per exchange) and the bound
recorder   the sampling loop
analysis   uptime, outages and their causes from what was recorded
rules      each platform's published reliability rule (data: platform_rules.yaml)
render     table, markdown and JSON reports
"""
