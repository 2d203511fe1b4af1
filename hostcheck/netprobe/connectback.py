"""The former import path of :mod:`hostcheck.probeserver.connectback`: the same module under its old
name, so code written against the old path keeps working."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("hostcheck.probeserver.connectback")
