"""A reliability recording: its SQLite database and what reading it gives, shared by the
recorder that writes it (hostcheck.watch) and the audit's collector that reads it
(hostcheck.collectors.watch).

store      the SQLite database (the only module that writes it)
analysis   uptime, outages and their causes from what was recorded (pure)
"""
