"""A script of ``benchmarks/`` loaded as a module, for the tests that check what a benchmark measures.

The scripts are not a package: each imports its siblings as a script would (``from bench_robust import ...``), and
some define dataclasses, which look their module up by name while being defined, or start worker processes,
which find their target by module name. So a script is imported by its own name with ``benchmarks/`` on the path,
and kept in ``sys.modules`` like any imported module.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``name`` (imported once per process, like any module)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))
