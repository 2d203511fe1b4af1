"""The commands of ``hostcheck``: option parsing and wiring, the work is in the modules each imports.

One module per command family; ``hostcheck.cli`` lists them and imports one only when its
command runs (or its help is asked for), so a command's options take their defaults and limits
from the libraries that own them without slowing ``hostcheck --help``.

common    what every command shares: output formats, usage errors, writing the result
live      options for collecting this machine's facts (audit, facts, offer), the probe token
audit     ``audit`` and ``facts``
offer     ``offer``
probe     ``probe-server`` and ``speedtest``
fleet     ``fleet`` (a table across many hosts' reports) and ``fleet diff``
explain   ``explain`` and ``policies``
earnings  ``earnings`` (the work is in the hostcheck.earnings library)
watch     ``watch`` and its sub-commands (the recorder and the report are in hostcheck.watch)
"""
