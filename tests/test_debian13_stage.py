"""CI runs the whole suite on Debian 12's Slurm 22.05, then ``site/quickstart/debian13.sh``'s list of test paths on
Debian 13's Slurm 24.11. A Slurm-facing test module left off that list is tested on one version only: the security
suite's helpers read ``job_state`` as 22.05's string, and nobody saw that they failed on 24.11's list until the
list was checked (twenty-fourth session). This test keeps the list whole."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SCRIPT = TESTS.parent / "site" / "quickstart" / "debian13.sh"
CLUSTER_FIXTURES = frozenset({"devcluster", "devcluster_factory", "acctcluster", "site", "hostile"})
"""The fixtures that start a real Slurm cluster (``tests/conftest.py``, ``tests/integration/conftest.py``,
``tests/security/conftest.py``)."""


def stage_paths() -> list[str]:
    text = SCRIPT.read_text()
    match = re.search(r'^DEFAULT_TESTS="([^"]*)"', text, re.MULTILINE)
    assert match, f"{SCRIPT} has no DEFAULT_TESTS"
    return match.group(1).split()


def starts_a_cluster(path: Path) -> bool:
    """A function of the module takes a cluster fixture, or the module is marked ``slurm``."""
    for node in ast.walk(ast.parse(path.read_text())):
        mark = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
        if mark and node.attr == "slurm" and node.value.attr == "mark":  # ``pytest.mark.slurm``
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if any(a.arg in CLUSTER_FIXTURES - _parametrized(node) for a in args):
                return True
    return False


def _parametrized(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The argument names a ``pytest.mark.parametrize`` decorator gives values to: not fixtures, whatever their
    name (``tick_kinds``' test takes ``site`` as a flag)."""
    names: set[str] = set()
    for dec in fn.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        if call and isinstance(call.func, ast.Attribute) and call.func.attr == "parametrize" and call.args:
            first = call.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.update(n.strip() for n in first.value.split(","))
    return names


def covered(path: Path, paths: list[str]) -> bool:
    rel = path.relative_to(TESTS.parent).as_posix()
    return any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in paths)


def test_every_module_that_starts_a_cluster_runs_on_slurm_24_11_too() -> None:
    paths = stage_paths()
    modules = [p for p in sorted(TESTS.rglob("test_*.py")) if starts_a_cluster(p)]
    assert len(modules) > 20, modules  # the detection sees the suite's Slurm modules at all
    missing = [p.relative_to(TESTS.parent).as_posix() for p in modules if not covered(p, paths)]
    assert not missing, f"add these to DEFAULT_TESTS in {SCRIPT.name}: {missing}"


def test_every_path_on_the_list_exists() -> None:
    root = TESTS.parent
    assert [p for p in stage_paths() if not (root / p).exists()] == []


def test_the_detection_tells_a_cluster_test_from_a_pure_one(tmp_path: Path) -> None:
    slurm = tmp_path / "test_a.py"
    slurm.write_text("def test_x(\n    devcluster, tmp_path\n) -> None:\n    pass\n")
    pure = tmp_path / "test_b.py"
    pure.write_text("def test_y(tmp_path) -> None:\n    site = 'pytest.mark.slurm'\n")
    marked = tmp_path / "test_c.py"
    marked.write_text("import pytest\n\npytestmark = pytest.mark.slurm\n")
    flag = tmp_path / "test_d.py"
    flag.write_text("import pytest\n\n@pytest.mark.parametrize('site, n', [(1, 1)])\ndef test_z(site, n): ...\n")
    both = tmp_path / "test_e.py"
    both.write_text("import pytest\n\n@pytest.mark.parametrize('n', [1])\ndef test_w(site, n):\n    pass\n")
    assert starts_a_cluster(slurm) and starts_a_cluster(marked) and not starts_a_cluster(pure)
    assert not starts_a_cluster(flag)  # a parametrized argument named like a fixture is a value, not the fixture
    assert starts_a_cluster(both)
