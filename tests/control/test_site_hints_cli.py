"""``slurmplan site hints``: its own --help example is accepted, and --json says which GPU counts a job may get."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"}  # argparse would wrap the example at its hyphen
    argv = [sys.executable, "-m", "slurmplan.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


def test_the_help_example_is_accepted_by_the_command() -> None:
    text = " ".join(_cli("site", "hints", "--help").stdout.split())
    example = re.search(r'"(slurmplan:[^"]+)"', text)[1]
    proc = _cli("site", "hints", example)
    assert proc.returncode == 0, proc.stderr


def test_json_shows_the_gpu_range_a_fixed_job_keeps_its_count() -> None:
    fixed = json.loads(_cli("site", "hints", "--json", "slurmplan:model=x;gpus=4").stdout)
    assert (fixed["gpu_range"], fixed["elastic"]) == ([4, 4], False)
    elastic = json.loads(_cli("site", "hints", "--json", "slurmplan:gpus=4;min=2;max=8").stdout)
    assert (elastic["gpu_range"], elastic["elastic"]) == ([2, 8], True)
