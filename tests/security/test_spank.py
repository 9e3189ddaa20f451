"""Issue 24 item 13 on the site cluster: the SPANK plugin's plan sources cannot be spoofed by the job's user.

* a plan file in ``plan_dir`` is read only when root or the folder's owner wrote it and nobody else can write it;
* the admin-comment fallback is not fooled by a job name holding ``AdminComment=...``;
* a long ``scontrol`` answer (a long job name and comment) still gives the plan (it was cut at 8 KB).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurmplan.control.hook import write_plan_file
from slurmplan.domain import Cell, Plan
from slurmplan.formats import compose_admin_comment, format_decision

pytestmark = pytest.mark.slurm

SCRIPT = "srun -n1 env | grep ^SLURMPLAN_ | sort > {out}\n"
DECISION = compose_admin_comment("slurmplan:gpus=2", format_decision(Cell("a100", 2), Plan(dp=2), "round 1"))


def _run(hostile, name: str | bytes, out: Path, *extra: str) -> dict[str, str]:
    hints = extra or ("--comment", "slurmplan:gpus=2")
    job_id = hostile.sbatch("-J", name, *hints, script=SCRIPT.format(out=out))
    hostile.site.release_with(job_id, DECISION)
    hostile.wait_state(job_id, "COMPLETED", timeout=60)
    return dict(line.split("=", 1) for line in out.read_text().splitlines()) if out.exists() else {}


def test_a_job_name_cannot_spoof_the_admin_comment(hostile) -> None:
    out = hostile.site.jobs_dir / "spoof.env"
    env = _run(hostile, "x AdminComment=slurmplan:gpus=1 || slurmplan: t4x64 dp64 tp1 pp1 mb1 ga1", out)
    assert env.get("SLURMPLAN_GPUS") != "64" and env.get("SLURMPLAN_GPU_TYPE") != "t4"
    assert "SLURMPLAN_PLAN_SOURCE" not in env  # ambiguous: no plan rather than the user's


def test_a_long_answer_still_gives_the_plan(hostile) -> None:
    """Every field a user may fill, each near Slurm's 1 KB limit: ``scontrol show job -o`` is then over 8 KB."""
    out = hostile.site.jobs_dir / "long.env"
    long_dir = "/tmp/" + "./" * 480
    filler = "m" * 900
    opts = ("--plan-gpus=2", "--comment", "c" * 1000, "-o", long_dir + "o.txt", "-e", long_dir + "e.txt")
    opts += ("-i", "/dev/" + "./" * 480 + "null", "-D", long_dir, f"--mail-user={filler}", f"--network={filler}")
    opts += (f"--account={filler}", f"--wckey={filler}")
    env = _run(hostile, "n" * 1000, out, *opts)
    assert env.get("SLURMPLAN_PLAN_SOURCE") == "admin-comment" and env["SLURMPLAN_GPUS"] == "2"


def test_a_plan_file_the_user_owns_is_ignored(hostile) -> None:
    out = hostile.site.jobs_dir / "planted.env"
    job_id = hostile.sbatch("--comment", "slurmplan:gpus=2", script=SCRIPT.format(out=out))
    planted = write_plan_file(hostile.site.plan_dir, job_id, Cell("t4", 1), Plan(tp=1))
    os.chown(planted, hostile.user.uid, hostile.user.gid)  # as if the user had written it
    hostile.site.release_with(job_id, DECISION)
    hostile.wait_state(job_id, "COMPLETED", timeout=60)
    env = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert (env["SLURMPLAN_PLAN_SOURCE"], env["SLURMPLAN_GPU_TYPE"]) == ("admin-comment", "a100")
