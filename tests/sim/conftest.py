"""Fixtures for the simulator's tests."""

from __future__ import annotations

import pytest

from slurmplan.perf.gavel_table import load_gavel_table


@pytest.fixture(scope="session")
def table():
    return load_gavel_table()
