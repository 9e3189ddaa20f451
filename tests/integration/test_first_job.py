"""README "Your first managed training job", run exactly as written: the bash block between the
``first-job:begin``/``end`` markers is taken from README.md and run by bash on a fresh cluster of its own.

Only the environment is the test's: the cluster's state directory (``$SLURMPLAN_DEVCLUSTER_DIR``), ``$HOME`` (the
template's checkpoints), and a working directory that holds ``templates/`` as a checkout does (so the job's log
and ``daemon.log`` land there, not in the repository).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from site_cluster import ROOT, unusable_reason

pytestmark = [pytest.mark.slurm, pytest.mark.skipif(unusable_reason() is not None, reason=str(unusable_reason()))]


def readme_steps() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- first-job:begin -->\n```bash\n(.*?)```\n<!-- first-job:end -->", text, re.S)
    assert block, "README.md lost its first-job block"
    return block[1]


def test_readme_block_is_the_one_documented() -> None:
    steps = readme_steps()
    assert "slurmplan devcluster up --site" in steps and "templates/elastic_dp.sbatch" in steps
    assert "slurmplan daemon" in steps and "slurmplan devcluster down" in steps


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short folder: slurmd's Unix socket paths under the state directory must stay below 108 bytes, and
    pytest's own temporary folders are too deep for that."""
    path = Path(tempfile.mkdtemp(prefix="slurmplan-fj-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_first_managed_training_job_as_the_readme_says(short_tmp: Path) -> None:
    tmp_path = short_tmp
    work = tmp_path / "work"
    work.mkdir()
    (work / "templates").symlink_to(ROOT / "templates")
    os.chmod(tmp_path, 0o755)
    state = tmp_path / "cluster"
    script = "set -x\n" + readme_steps() + 'echo "FIRST-JOB=$JOB"\n'
    env = {
        **os.environ,
        "SLURMPLAN_DEVCLUSTER_DIR": str(state),
        "HOME": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }
    for name in ("SLURM_CONF", "SLURMPLAN_CONFIG", "SLURMPLAN_REPORT_DIR"):
        env.pop(name, None)
    transcript = tmp_path / "transcript.txt"
    try:  # into a file: the cluster's daemons, started by `up`, inherit bash's output and would hold a pipe open
        with open(transcript, "w") as out_file:
            proc = subprocess.run(["bash", "-c", script], cwd=work, env=env, stdout=out_file, stderr=subprocess.STDOUT,
                                  timeout=480)  # fmt: skip
    finally:  # whatever happened, no cluster is left running
        subprocess.run([sys.executable, "-m", "slurmplan.cli", "devcluster", "down", "--state-dir", str(state)],
                       env=env, capture_output=True, timeout=120)  # fmt: skip
    out = transcript.read_text()
    daemon_log = (work / "daemon.log").read_text() if (work / "daemon.log").exists() else "<no daemon.log>"
    assert proc.returncode == 0, out[-4000:] + daemon_log[-3000:]
    job = int(re.search(r"FIRST-JOB=(\d+)", out)[1])
    log = (work / f"elastic-dp-{job}.out").read_text()
    assert re.search(rf"elastic-dp: job {job} restart \d+ on \d GPUs \((a100|v100), dp \d", log), log
    assert "Traceback" not in log and "error" not in log.lower().replace("errors", ""), log
    ckpt = tmp_path / "checkpoints" / f"elastic-dp-{job}"
    assert (ckpt / "step-00000030").is_dir(), log  # all 30 steps, in the folder of this job id
    assert "JOBID  NAME" in out and "STEP" in out  # status
    assert f"job {job} (elastic-dp)" in out and "candidates" in out  # explain
    assert "decision" in out and "scheduled" in out  # history: the daemon's decision
    assert "slurmplan daemon: stopped after" in daemon_log, daemon_log[-2000:]
