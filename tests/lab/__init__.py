"""Lab hosts for tests: Debian 12 as systemd-nspawn containers and as a qemu TCG VM.

See README.md in this folder for the fixture API.
"""

from tests.lab.errors import LabError
from tests.lab.remote import RemoteHost, Result

__all__ = ["LabError", "RemoteHost", "Result"]
