"""Write the JSON Schemas in ``hostcheck/schema/`` from the models in :mod:`hostcheck.models`.

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

from hostcheck.models import FACTS_PLACEHOLDER, Facts, PolicyDocument, Report

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
BASE_ID = "https://github.com/hostcheck/hostcheck/schema/"
REGENERATE = "python -m hostcheck.schema_gen"


def _schema(model: type[BaseModel], name: str, title: str) -> dict[str, Any]:
    body = model.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": BASE_ID + name,
        **body,
        "title": title,
    }


def report_schema() -> dict[str, Any]:
    schema = _schema(Report, "report-v1.json", "hostcheck audit report, version 1")
    facts = Facts.model_json_schema()
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
    schemas = {"report-v1.json": report_schema(), "policy-v1.json": policy_schema(),
               "earnings-v1.json": earnings_schema()}
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
