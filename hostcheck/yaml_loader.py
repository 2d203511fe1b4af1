"""The YAML loader every reader of YAML uses: PyYAML's safe constructor and resolver on libyaml's
parser when PyYAML was built with it (the pure-Python parser was most of an audit's time: every
audit reads all shipped policies), the pure-Python one otherwise. Both give nodes with lines."""

from __future__ import annotations

from typing import Any

import yaml

LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=LOADER)
