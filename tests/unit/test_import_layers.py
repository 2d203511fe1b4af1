"""hostcheck's own import graph: no cycle between packages, and imports go one way only, from a
higher layer to a lower one. Every import is read from the source with ``ast``, those inside
functions too (a deferred import is still a dependency); ``importlib`` by name is not seen.

A module's layer is the one of its longest prefix in LAYERS. Low to high:

0 foundation   the types and the knowledge shared by collectors and checks (models, facts and
               their table, errors, GPU models, laptops, Docker settings, addresses, routes,
               sudoers, nftables rulesets, the agent catalogue); touches nothing
1 system       what touches the machine or the network: collectors, probes, the recording and
               the recorder's samplers, live measurement (power, disk, bandwidth), the probe server
2 judgement    pure decisions over facts and policy: checks, scoring, policies, reliability
               rules, earnings, the power and offer figures (measure), fleet aggregation,
               redaction, the report's model
3 rendering    text, tables, markdown, Prometheus metrics
4 commands     option parsing and wiring: commands/, the CLI, generators run as modules
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "hostcheck"

FOUNDATION, SYSTEM, JUDGEMENT, RENDERING, COMMANDS = range(5)
NAMES = ("foundation", "system", "judgement", "rendering", "commands")

LAYERS: dict[str, int] = {
    "hostcheck": FOUNDATION,  # the package itself (its version) and anything not named below
    "hostcheck.errors": FOUNDATION,
    "hostcheck.exit_codes": FOUNDATION,
    "hostcheck.models": FOUNDATION,
    "hostcheck.facts": FOUNDATION,
    "hostcheck.wording": FOUNDATION,
    "hostcheck.fact_paths": FOUNDATION,
    "hostcheck.fact_validation": FOUNDATION,
    "hostcheck.upgrade": FOUNDATION,
    "hostcheck.safeio": FOUNDATION,
    "hostcheck.yaml_loader": FOUNDATION,
    "hostcheck.progress": FOUNDATION,
    "hostcheck.file_kinds": FOUNDATION,
    "hostcheck.knowledge": FOUNDATION,
    "hostcheck.firewall": FOUNDATION,
    "hostcheck.collectors": SYSTEM,
    "hostcheck.netprobe": SYSTEM,
    "hostcheck.recording": SYSTEM,
    "hostcheck.watch": SYSTEM,
    "hostcheck.probeserver": SYSTEM,
    "hostcheck.market": SYSTEM,  # the key, the HTTP client, the parsers, the queries, the database
    "hostcheck.selftest": SYSTEM,  # the driver API, NVML readings, the stages, the kernel log
    "hostcheck.selftest.kernels": FOUNDATION,  # PTX text
    "hostcheck.selftest.results": FOUNDATION,  # what the stages measured, as data
    "hostcheck.selftest.rules": FOUNDATION,  # thresholds and sources (rules.yaml)
    "hostcheck.measure": JUDGEMENT,
    "hostcheck.checks": JUDGEMENT,
    "hostcheck.judge": JUDGEMENT,
    "hostcheck.scoring": JUDGEMENT,
    "hostcheck.policy": JUDGEMENT,
    "hostcheck.selftest_map": JUDGEMENT,
    "hostcheck.headline": JUDGEMENT,
    "hostcheck.answer": JUDGEMENT,
    "hostcheck.accumulated": JUDGEMENT,
    "hostcheck.report": JUDGEMENT,
    "hostcheck.rules_age": JUDGEMENT,
    "hostcheck.redact": JUDGEMENT,
    "hostcheck.fleet": JUDGEMENT,
    "hostcheck.earnings": JUDGEMENT,
    "hostcheck.watch.rules": JUDGEMENT,
    "hostcheck.market.summary": JUDGEMENT,
    "hostcheck.market.trend": JUDGEMENT,
    "hostcheck.selftest.verdict": JUDGEMENT,
    "hostcheck.selftest.safety": JUDGEMENT,
    "hostcheck.render": RENDERING,
    "hostcheck.watch.metrics": RENDERING,
    "hostcheck.watch.textfile": RENDERING,
    "hostcheck.render.market": RENDERING,
    "hostcheck.render.selftest": RENDERING,
    "hostcheck.commands": COMMANDS,
    "hostcheck.cli": COMMANDS,
    "hostcheck.schema_gen": COMMANDS,
}

# What the collectors must never reach, at any depth of their imports: they record, the checks
# decide (what sudo grants an account is the checks' to work out from the sudoers recorded).
NOT_FROM_COLLECTORS = ("hostcheck.checks", "hostcheck.watch.rules", "hostcheck.judge", "hostcheck.scoring",
                       "hostcheck.policy", "hostcheck.knowledge.sudoers.matching")


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports() -> dict[str, set[str]]:
    """Module -> the hostcheck modules it imports (a ``from X import name`` names X.name when that
    is a module, else X; importing ``a.b.c`` runs ``a`` and ``a.b`` first, which count too)."""
    known = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            for target in targets:
                parts = target.split(".")
                for end in range(1, len(parts) + 1):
                    prefix = ".".join(parts[:end])
                    if prefix in known and prefix != name and not name.startswith(f"{prefix}."):
                        graph[name].add(prefix)
    return graph


def layer(module: str) -> int:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in LAYERS:
            return LAYERS[prefix]
    raise AssertionError(f"{module} is outside hostcheck")


def package_of(module: str) -> str:
    """``hostcheck.x`` for a module of package ``hostcheck.x``; a top-level module is its own."""
    return ".".join(module.split(".")[:2])


def test_the_graph_is_read() -> None:
    graph = imports()
    # Samples of each kind of import: module level, inside a function, relative-free from-import.
    assert "hostcheck.recording.store" in graph["hostcheck.collectors.watch"]  # inside summarise()
    assert "hostcheck.checks.base" in graph["hostcheck.checks.reliability"]
    assert "hostcheck.watch.rules" in graph["hostcheck.commands.watch"]  # inside report()
    assert len(graph) > 100


def test_every_import_goes_down_the_layers() -> None:
    upward = [f"{a} ({NAMES[layer(a)]}) imports {b} ({NAMES[layer(b)]})"
              for a, targets in sorted(imports().items()) for b in sorted(targets) if layer(b) > layer(a)]
    assert not upward, "\n".join(upward)


def test_no_cycle_between_packages() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for a, targets in imports().items():
        for b in targets:
            if package_of(a) != package_of(b):
                edges[package_of(a)].add(package_of(b))

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    cycles = sorted({" <-> ".join(sorted({a, *[b for b in reach(a) if a in reach(b)]}))
                     for a in list(edges) if a in reach(a)})
    assert not cycles, "\n".join(cycles)


def test_collectors_reach_no_judgement() -> None:
    graph = imports()
    bad = []
    for module in graph:
        if not module.startswith("hostcheck.collectors"):
            continue
        seen: set[str] = set()
        todo = [module]
        while todo:
            for nxt in graph.get(todo.pop(), set()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        bad += [f"{module} reaches {m}" for m in sorted(seen) if m.startswith(NOT_FROM_COLLECTORS)]
    assert not bad, "\n".join(bad)


def test_every_module_has_a_layer_by_name() -> None:
    """A new top-level module or package is placed in LAYERS, not left to the package's default."""
    unplaced = sorted({package_of(m) for m in modules() if package_of(m) != "hostcheck"} - set(LAYERS))
    assert not unplaced, unplaced


def test_no_check_family_imports_another() -> None:
    """A family of checks stands on its own: its module imports the shared ones (the check
    machinery, the readers of facts more than one family uses) and no other family's, and the
    shared ones import no family. What two families judge alike is a shared reader."""
    from hostcheck.checks import SHARED

    shared = {"hostcheck.checks", *(f"hostcheck.checks.{name}" for name in SHARED)}
    checks = {m for m in modules() if m == "hostcheck.checks" or m.startswith("hostcheck.checks.")}
    families = checks - shared
    assert {"hostcheck.checks.agents", "hostcheck.checks.network"} <= families
    graph = imports()
    bad = [f"{a} imports {b}" for a in sorted(checks - {"hostcheck.checks"}) for b in sorted(graph.get(a, ())) if b in families]
    assert not bad, "\n".join(bad)
