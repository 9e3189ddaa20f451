"""``python -m slurmplan.launch --nproc 2 templates/example_train.py`` as a user runs it: real spawned processes,
the example's own spec, a checkpoint and a throughput report at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from launch_helpers import EXAMPLE, saved


def test_module_entry_point_with_two_local_processes(tmp_path: Path) -> None:
    env = {**os.environ, "SLURMPLAN_REPORT_DIR": str(tmp_path / "reports"), "SLURM_JOB_ID": "4242"}
    env.pop("SLURM_STEP_ID", None)
    cmd = [sys.executable, "-m", "slurmplan.launch", "--nproc", "2", str(EXAMPLE), "--", "--steps", "6",
           "--checkpoint-dir", str(tmp_path / "ckpt")]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = saved(tmp_path / "ckpt")
    assert state["step"] == 6 and state["world_size"] == 2 and sorted(state["workers"]) == [0, 1, 2, 3]
    report = [json.loads(line) for line in (tmp_path / "reports" / "4242.jsonl").read_text().splitlines()]
    assert report[-1]["job_id"] == 4242 and report[-1]["gpus"] == 2 and report[-1]["model"] == "example-mlp"
    # progress for the daemon (status/explain): steps done, the newest checkpoint's step, the total
    assert (report[-1]["step"], report[-1]["checkpoint_step"], report[-1]["total_steps"]) == (6, 6, 6)
    # the framework that ran the plan, so the daemon's refit predicts the report under it (issue 28)
    assert report[-1]["stack"] == "ddp"


def test_module_entry_point_refuses_a_missing_target(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "slurmplan.launch", str(tmp_path / "nope.py")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 1 and "invalid target" in proc.stderr
