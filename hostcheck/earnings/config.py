"""The per-user earnings config file (TOML or YAML), read into the same keys as the flags.

Every parse failure is an :class:`EarningsInputError` naming the file, the line where it is known
and the field: TOML through tomllib (which keeps no positions, so the lines come from a scan of
the text), YAML node by node with the policies' reader, so each key keeps its line. Only shapes
are checked here; the values are checked with the flags', once the currency is known
(:func:`hostcheck.earnings.inputs.build`).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from hostcheck import safeio
from hostcheck.earnings.inputs import BOUNDS, CONFIG_KEYS, MAX_CONFIG_BYTES, check_number_shape, config_where
from hostcheck.errors import EarningsInputError, FileInputError

_TOML_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(#.*)?$")
_TOML_KEY = re.compile(r"^\s*([A-Za-z0-9_.-]+|\"[^\"]*\"|'[^']*')\s*=")


def _toml_lines(text: str) -> dict[str, int]:
    """The line of each key (``price``, ``platform_price.vast``) in a TOML file: tomllib keeps no
    positions. A best effort for messages only: the first line where the key is set."""
    lines: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if match := _TOML_TABLE.match(line):
            table = match.group(1)
            lines.setdefault(table, number)
        elif match := _TOML_KEY.match(line):
            key = match.group(1).strip("\"'")
            lines.setdefault(f"{table}.{key}" if table else key, number)
    return lines


def _toml_number_too_long(text: str) -> tuple[int, str] | None:
    """(line, key) of an integer too long for Python to convert (tomllib raises a bare ValueError)."""
    limit = sys.get_int_max_str_digits() or 4300
    for number, line in enumerate(text.splitlines(), start=1):
        if any(len(run.replace("_", "")) > limit for run in re.findall(r"[0-9_]+", line)):
            match = _TOML_KEY.match(line)
            return number, match.group(1).strip("\"'") if match else "?"
    return None


def _read_toml(text: str, path: Path) -> tuple[Any, dict[str, int]]:
    import tomllib

    try:
        return tomllib.loads(text), _toml_lines(text)
    except tomllib.TOMLDecodeError as exc:
        raise EarningsInputError(f"{path}: not valid TOML: {exc}") from None
    except ValueError as exc:  # an integer past Python's digit limit, raised while converting it
        found = _toml_number_too_long(text)
        if found is None:
            raise EarningsInputError(f"{path}: not valid TOML: {exc}") from None
        line, key = found
        raise EarningsInputError(f"{path}: line {line}: {key}: the number has more digits than any price "
                                 "or reading could (not a usable number)") from None
    except RecursionError:
        raise EarningsInputError(f"{path}: not valid TOML: nested too deeply") from None


def _read_yaml(text: str, path: Path) -> tuple[Any, dict[str, int]]:
    """YAML built node by node, as the policies are: every key keeps its line, and a scalar YAML
    resolves but cannot build (5000 digits, 2026-02-30) is an error at its line and field."""
    import yaml

    from hostcheck.policy import _Lines, refuse_yaml_bombs
    from hostcheck.yaml_loader import LOADER

    lines = _Lines()
    try:
        refuse_yaml_bombs(text)
        node = yaml.compose(text, Loader=LOADER)
        data = None if node is None else lines.build(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        raise EarningsInputError(f"{path}: {where}not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except ValueError as exc:  # PolicyError from the shared reader: "line N: field: why"
        raise EarningsInputError(f"{path}: {str(exc).replace(': policy: ', ': ')}") from None
    except RecursionError:
        raise EarningsInputError(f"{path}: not valid YAML: nested too deeply") from None
    named = {".".join(str(part) for part in loc): line for loc, line in lines.key.items()
             if all(isinstance(part, str) for part in loc)}
    return data, named


def load_config(path: Path) -> dict[str, Any]:
    """The config file's keys, checked for shape (values are checked with the flags', once the
    currency is known). The line of each key travels in ``_config_lines`` for the messages."""
    try:
        text = safeio.read_text(path, limit=MAX_CONFIG_BYTES)
    except FileInputError as exc:
        raise EarningsInputError(f"{path}: {exc}") from None
    data: Any
    if path.suffix == ".toml":
        data, lines = _read_toml(text, path)
    elif path.suffix in (".yaml", ".yml"):
        data, lines = _read_yaml(text, path)
    else:
        raise EarningsInputError(f"{path}: the config file must end in .toml, .yaml or .yml")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise EarningsInputError(f"{path}: must be a table of keys (price = 0.25 ...), not {type(data).__name__}")

    def where(key: str) -> str:
        return config_where(path, lines, key)

    for key, value in data.items():
        if key not in CONFIG_KEYS:
            raise EarningsInputError(f"{where(key)}: unknown key (allowed: {', '.join(sorted(CONFIG_KEYS))})")
        if key == "platform_price":
            if not isinstance(value, dict):
                raise EarningsInputError(f"{where(key)}: must be a table of platform = price")
            for name, price in value.items():
                check_number_shape(price, where(f"platform_price.{name}"))
        elif key == "electricity":
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise EarningsInputError(f"{where(key)}: must be a price per kWh or a schedule such as "
                                         f"07-23=0.32,23-07=0.18, not {value!r}")
        elif key in BOUNDS:
            check_number_shape(value, where(key))
        elif key == "gpus":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 64:
                raise EarningsInputError(f"{where(key)}: must be a whole number 1-64, not {value!r}")
        elif key in ("currency", "heating") and not isinstance(value, str):
            raise EarningsInputError(f"{where(key)}: must be a string, not {value!r}")
    return {**data, "_config_lines": lines}
