"""Write the JSON Schemas in ``hostcheck/schema/`` from the models in :mod:`hostcheck.models`,
the facts table in :mod:`hostcheck.fact_paths` and the check families the check modules declare.

    python -m hostcheck.schema_gen          # rewrite the shipped schemas
    python -m hostcheck.schema_gen --check  # exit 1 when a shipped schema is out of date

The shipped files are generated, never edited by hand: a test fails when they differ from
what the models give.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hostcheck.checks import family_prefixes
from hostcheck.fact_paths import FACTS_FORMAT, SECTIONS, TABLE, Fact, FactType, children
from hostcheck.models import CHECK_ID_SHAPE, FACTS_PLACEHOLDER, PolicyDocument, Report, check_id_pattern

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
BASE_ID = "https://github.com/hostcheck/hostcheck/schema/"
REGENERATE = "python -m hostcheck.schema_gen"


def _with_families(node: Any, pattern: str) -> Any:
    """The schema with each check id's shape replaced by the pattern that names the families."""
    if isinstance(node, dict):
        return {key: pattern if key == "pattern" and value == CHECK_ID_SHAPE else _with_families(value, pattern)
                for key, value in node.items()}
    if isinstance(node, list):
        return [_with_families(item, pattern) for item in node]
    return node


def _schema(model: type[BaseModel], name: str, title: str) -> dict[str, Any]:
    body = _with_families(model.model_json_schema(), check_id_pattern(family_prefixes()))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": BASE_ID + name,
        **body,
        "title": title,
    }


UNKNOWN_REF = {"$ref": "#/$defs/Unknown"}
UNKNOWN_DEF = {"type": "object", "title": "Unknown", "description": "a fact that could not be determined, and why",
               "properties": {"$unknown": {"type": "string"}}, "required": ["$unknown"], "additionalProperties": False}
_SCALARS: dict[FactType, dict[str, Any]] = {FactType.BOOL: {"type": "boolean"}, FactType.INT: {"type": "integer"}, FactType.NUMBER: {"type": "number"},
            FactType.TEXT: {"type": "string"}, FactType.TIME: {"type": "string"},
            FactType.TEXTS: {"type": "array", "items": {"type": "string"}},
            FactType.SETTING: {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
            FactType.RAW: {}}


def _fact_schema(fact: Fact | None, path: str) -> dict[str, Any]:
    """One fact: its value's shape, or null, or unknown. Keys are not required (an older file of
    this format may lack a fact added since) and others are allowed (older files may keep more)."""
    kind = fact.type if fact else FactType.OBJECT
    if kind in _SCALARS:
        body: dict[str, Any] = dict(_SCALARS[kind])
    elif kind is FactType.LIST:
        body = {"type": "array", "items": _fact_schema(TABLE[f"{path}.*"], f"{path}.*")}
    elif kind is FactType.MAP:
        body = {"type": "object", "additionalProperties": _fact_schema(TABLE[f"{path}.*"], f"{path}.*")}
    else:
        declared = children(path) if fact else {s.name: TABLE[s.name] for s in SECTIONS}
        body = {"type": "object",
                "properties": {name: _fact_schema(child, f"{path}.{name}" if path else name)
                               for name, child in declared.items()}}
    if fact is None:
        return body
    if fact.meaning:
        body["description"] = fact.meaning + (f" ({fact.unit})" if fact.unit else "")
    return {"anyOf": [body, {"type": "null"}, UNKNOWN_REF], **({"description": body.pop("description")}
                                                                 if "description" in body else {})}


def facts_schema() -> dict[str, Any]:
    """The facts tree (``hostcheck facts``; ``facts`` of a report), from the table."""
    body = _fact_schema(None, "")
    body["properties"]["meta"] = {"type": "object", "properties": {
        **_fact_schema(TABLE["meta"], "meta")["anyOf"][0]["properties"],
        "facts_format": {"const": FACTS_FORMAT, "description": TABLE["meta.facts_format"].meaning}},
        "required": ["facts_format"]}
    body["required"] = ["meta"]
    return {"title": f"hostcheck facts, format {FACTS_FORMAT}", **body, "$defs": {"Unknown": UNKNOWN_DEF}}


def report_schema() -> dict[str, Any]:
    schema = _schema(Report, "report-v1.json", "hostcheck audit report, version 1")
    facts = facts_schema()
    defs = schema.setdefault("$defs", {})
    defs.update(facts.pop("$defs", {}))
    defs["Facts"] = facts
    if schema["properties"]["facts"].get("x-hostcheck") != FACTS_PLACEHOLDER["x-hostcheck"]:
        raise RuntimeError("Report.facts no longer carries the facts placeholder")
    schema["properties"]["facts"] = {"$ref": "#/$defs/Facts"}
    schema["$defs"] = dict(sorted(defs.items()))
    return schema


def policy_schema() -> dict[str, Any]:
    return _schema(PolicyDocument, "policy-v1.json", "hostcheck policy file, format 1")


def earnings_schema() -> dict[str, Any]:
    from hostcheck.earnings.report import EarningsReport

    return _schema(EarningsReport, "earnings-v1.json", "hostcheck earnings report, version 1")


def generated() -> dict[str, str]:
    """File name -> the text it should have."""
    facts = {"$schema": "https://json-schema.org/draft/2020-12/schema",
             "$id": BASE_ID + f"facts-v{FACTS_FORMAT}.json", **facts_schema()}
    schemas = {"report-v1.json": report_schema(), "policy-v1.json": policy_schema(),
               "earnings-v1.json": earnings_schema(), f"facts-v{FACTS_FORMAT}.json": facts}
    return {name: json.dumps(schema, indent=2, ensure_ascii=False) + "\n" for name, schema in schemas.items()}


def stale(folder: Path = SCHEMA_DIR) -> list[str]:
    """Names of the shipped schemas that differ from what the models generate."""
    out = []
    for name, text in generated().items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            out.append(name)
    return out


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        names = stale()
        if names:
            print(f"out of date: {', '.join(names)}; regenerate with `{REGENERATE}`", file=sys.stderr)
            return 1
        return 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    for name, text in generated().items():
        (SCHEMA_DIR / name).write_text(text, encoding="utf-8")
        print(SCHEMA_DIR / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
