"""The rooms of ``slurmplan/`` keep their rules: checked on the AST of every module, lazy imports included.

Rules (DESIGN.md "Layout", issue 13):
- the decision rooms (domain, formats, tick types, tick, perf, policy, mechanism, sim) import nothing from
  slurm/, control/ or the cli, so the simulator and the tick never need Slurm or a database;
- launch/ (inside a job) imports neither control/ nor the cli; slurm/ does not import control/ nor the cli;
- the neutral modules (``domain``, ``formats``, ``tick_types``) import at most ``domain``;
- only slurm/ starts processes (``subprocess``, ``os.system``/``exec*``/``spawn*``/``popen``/``fork``, ``pty``,
  asyncio subprocesses). Worker pools of Python code (``multiprocessing``, ``concurrent.futures``: the
  simulator's parallel runs, the launcher's local workers) are not "processes" in this sense: they run
  slurmplan's own code, not another program;
- no import cycle between rooms.

An import inside a function (kept lazy for start-up time) is an edge like any other: it runs sooner or later,
and the rule is about what a room may depend on, not when. ``if TYPE_CHECKING:`` imports count too.
``importlib.import_module`` with literal module names (the cli's command list) counts as an import.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "slurmplan"

DECISION_ROOMS = frozenset(
    {"domain", "formats", "tick_types", "rules", "tick", "pipeline", "perf", "policy", "mechanism", "sim"}
)
NEUTRAL_ROOMS = frozenset({"domain", "formats", "tick_types", "rules"})
FORBIDDEN: Mapping[str, frozenset[str]] = {
    **{room: frozenset({"slurm", "control", "cli"}) for room in DECISION_ROOMS},
    "launch": frozenset({"control", "cli"}),
    "slurm": frozenset({"control", "cli"}),
}
PROCESS_ROOMS = frozenset({"slurm"})
PROCESS_MODULES = frozenset({"subprocess", "pty"})
OS_PROCESS_CALLS = ("system", "popen", "fork", "forkpty", "exec", "spawn", "posix_spawn")


@dataclass(frozen=True)
class Edge:
    src_module: str
    dst_module: str
    line: int

    def __str__(self) -> str:
        return f"{self.src_module}:{self.line} imports {self.dst_module}"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room_of(module: str) -> str | None:
    """``slurmplan.x.y`` -> ``x``; top-level modules are rooms of their own (``tick``, ``cli``, ``formats``)."""
    parts = module.split(".")
    if parts[0] != "slurmplan" or len(parts) < 2:
        return None
    return parts[1]


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, int]]:
    """Every module this source imports, anywhere in it, with the line."""
    found: list[tuple[str, int]] = []
    dynamic = any(
        isinstance(n, ast.Attribute)
        and n.attr == "import_module"
        or isinstance(n, ast.Name)
        and n.id == "import_module"
        for n in ast.walk(tree)
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, module, is_package)
            found.append((base, node.lineno))
            # ``from slurmplan import tick`` imports the module slurmplan.tick
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names if base == "slurmplan"]
        elif dynamic and isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text.startswith("slurmplan.") and all(p.isidentifier() for p in text.split(".")):
                found.append((text, node.lineno))
    return found


def process_starts(tree: ast.AST) -> list[tuple[str, int]]:
    """Places that start another program: imports of ``subprocess``/``pty``, ``os.system(...)`` and kin."""
    hits: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            hits += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] in PROCESS_MODULES]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            top = node.module.split(".")[0]
            if top in PROCESS_MODULES:
                hits.append((node.module, node.lineno))
            elif top == "os":
                hits += [(f"os.{a.name}", node.lineno) for a in node.names if a.name.startswith(OS_PROCESS_CALLS)]
            elif node.module == "asyncio":
                hits += [(f"asyncio.{a.name}", node.lineno) for a in node.names if "subprocess" in a.name]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr.startswith(OS_PROCESS_CALLS):
                hits.append((f"os.{node.attr}", node.lineno))
            elif node.value.id == "asyncio" and "subprocess" in node.attr:
                hits.append((f"asyncio.{node.attr}", node.lineno))
    return hits


@dataclass
class Survey:
    edges: list[Edge]
    processes: list[tuple[str, str, int]]
    modules: set[str]


def survey(root: Path) -> Survey:
    edges: list[Edge] = []
    processes: list[tuple[str, str, int]] = []
    modules: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        modules.add(module)
        tree = ast.parse(path.read_text(), filename=str(path))
        for dst, line in imports_of(tree, module, path.name == "__init__.py"):
            if dst.split(".")[0] == root.name:
                edges.append(Edge(module, dst, line))
        processes += [(module, what, line) for what, line in process_starts(tree)]
    return Survey(edges, processes, modules)


def room_edges(edges: Iterable[Edge]) -> dict[tuple[str, str], list[Edge]]:
    out: dict[tuple[str, str], list[Edge]] = defaultdict(list)
    for e in edges:
        a, b = room_of(e.src_module), room_of(e.dst_module)
        if a and b and a != b:
            out[(a, b)].append(e)
    return out


def forbidden_imports(s: Survey) -> list[str]:
    bad = []
    for (a, b), edges in sorted(room_edges(s.edges).items()):
        if b in FORBIDDEN.get(a, ()) or (a in NEUTRAL_ROOMS and b != "domain"):
            bad += [f"{a} must not import {b}: {e}" for e in edges]
    return bad


def foreign_processes(s: Survey) -> list[str]:
    return [
        f"{m}:{line} starts a process ({what}); only slurm/ may"
        for m, what, line in s.processes
        if room_of(m) not in PROCESS_ROOMS
    ]


def room_cycles(s: Survey) -> list[list[str]]:
    """Strongly connected groups of rooms (Tarjan); each is a cycle in the room graph."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in room_edges(s.edges):
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(set(graph)):
        if v not in index:
            visit(v)
    return groups


def describe_cycle(s: Survey, group: list[str]) -> str:
    edges = room_edges(s.edges)
    lines = [f"{a} -> {b}: {es[0]}" for (a, b), es in sorted(edges.items()) if a in group and b in group]
    return "rooms " + ", ".join(group) + " import each other:\n  " + "\n  ".join(lines)


@pytest.fixture(scope="module")
def package() -> Survey:
    return survey(PACKAGE)


def test_the_survey_sees_the_package(package: Survey) -> None:
    """Guards the checks below against passing vacuously (wrong path, walker that finds nothing)."""
    rooms = {room_of(m) for m in package.modules}
    assert {"domain", "tick", "tick_types", "formats", "mechanism", "control", "slurm", "launch", "sim", "cli"} <= rooms
    found = {(room_of(e.src_module), room_of(e.dst_module)) for e in package.edges}
    assert ("control", "slurm") in found and ("tick", "mechanism") in found
    assert ("cli", "sim") in found, "the cli's import_module list is read"
    assert any(room_of(m) == "slurm" for m, _, _ in package.processes)


def test_rooms_import_only_what_they_may(package: Survey) -> None:
    bad = forbidden_imports(package)
    assert not bad, "\n".join(bad)


def test_only_slurm_starts_processes(package: Survey) -> None:
    bad = foreign_processes(package)
    assert not bad, "\n".join(bad)


def test_no_import_cycle_between_rooms(package: Survey) -> None:
    cycles = room_cycles(package)
    assert not cycles, "\n".join(describe_cycle(package, g) for g in cycles)


def test_tick_imports_the_engine_at_top_level() -> None:
    """The tick <-> mechanism cycle used to hide behind a lazy import inside ``decide``."""
    tree = ast.parse((PACKAGE / "tick.py").read_text())
    top = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert "slurmplan.mechanism.engine" in top
    nested = [
        n
        for f in tree.body
        if isinstance(f, ast.FunctionDef)
        for n in ast.walk(f)
        if isinstance(n, ast.Import | ast.ImportFrom)
    ]
    assert not nested


# The checks above must be able to fail: each is run on a small package that breaks its rule.
def _write(root: Path, files: Mapping[str, str]) -> Path:
    pkg = root / "slurmplan"
    for rel, text in files.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


def test_checks_catch_a_lazy_forbidden_import_and_a_cycle(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "sim/__init__.py": "",
            "sim/engine.py": "def run():\n    from slurmplan.control import journal\n",
            "control/__init__.py": "",
            "control/journal.py": "from ..sim import engine\n",
            "formats.py": "from slurmplan.mechanism import x\n",
            "mechanism/__init__.py": "",
            "mechanism/x.py": "",
        },
    )
    s = survey(pkg)
    bad = forbidden_imports(s)
    assert any("sim must not import control" in b and "slurmplan.sim.engine:2" in b for b in bad)
    assert any("formats must not import mechanism" in b for b in bad)
    assert room_cycles(s) == [["control", "sim"]]


def test_checks_catch_processes_outside_slurm(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "launch/a.py": "import subprocess\n",
            "launch/b.py": "import os\ndef f():\n    os.execvp('x', ['x'])\n",
            "launch/c.py": "from os import system\n",
            "sim/d.py": "from concurrent.futures import ProcessPoolExecutor\n",
            "slurm/run.py": "import subprocess\n",
        },
    )
    bad = foreign_processes(survey(pkg))
    assert len(bad) == 3 and all(b.startswith("slurmplan.launch.") for b in bad)


def test_every_ready_made_policy_is_a_domain_policy() -> None:
    """tick/mechanism/control/sim are typed by ``domain.Policy``; the policies they are given must satisfy it."""
    from slurmplan.domain import Policy
    from slurmplan.policy.registry import load_policy

    names = sorted(p.stem for p in (PACKAGE.parent / "policies").glob("*.yaml"))
    assert names
    for name in names:
        policy = load_policy(name)
        assert isinstance(policy, Policy), name
        assert isinstance(policy.name, str)
    assert not isinstance(object(), Policy)
