"""The former import path of :mod:`hostcheck.probeserver.speed_endpoint`: the same module under its old
name, so code written against the old path keeps working."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("hostcheck.probeserver.speed_endpoint")
