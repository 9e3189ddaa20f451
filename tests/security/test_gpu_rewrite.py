"""Issue 24 item 7: job_submit.lua's rewrite of a managed job's typed GPU request, on the site cluster, with jobs
submitted by the unprivileged test user; and the daemon keeping the user's other features when it moves the type.
"""

from __future__ import annotations

import pytest

from slurmplan.domain import Action, ActionKind
from slurmplan.slurm.backend import action_commands

pytestmark = pytest.mark.slurm

HINTS = ("--comment", "slurmplan:model=llama2-7b")


def test_a_zero_count_is_left_as_asked_and_not_recorded(hostile) -> None:
    job = hostile.job(hostile.sbatch(*HINTS, "--gres=gpu:a100:0"))
    assert "asked=" not in job["admin_comment"]  # asked=a100:0 was a "bad hints" job held forever
    hostile.cancel(job["job_id"])


def test_two_typed_entries_stay_typed(hostile) -> None:
    job = hostile.job(hostile.sbatch(*HINTS, "--gres=gpu:a100:1,gpu:v100:1"))
    assert "a100" in job["tres_per_node"] and "v100" in job["tres_per_node"], job["tres_per_node"]
    assert "asked=" not in job["admin_comment"]
    hostile.cancel(job["job_id"])


def test_a_user_constraint_is_joined_with_the_type_not_dropped(hostile) -> None:
    job = hostile.job(hostile.sbatch(*HINTS, "--gres=gpu:a100:2", "--constraint=nvlink"))
    assert (job["tres_per_node"], job["features"]) == ("gres:gpu:2", "nvlink&a100")
    assert job["admin_comment"].startswith("slurmplan:model=llama2-7b;asked=a100:2")
    hostile.cancel(job["job_id"])


def test_an_or_constraint_keeps_the_request_typed(hostile) -> None:
    job = hostile.job(hostile.sbatch(*HINTS, "--gres=gpu:a100:2", "--constraint=nvlink|t4"))
    assert job["tres_per_node"] == "gres:gpu:a100:2" and job["features"] == "nvlink|t4"
    hostile.cancel(job["job_id"])


def test_gpus_per_job_is_refused_for_a_managed_job_naming_the_option(hostile) -> None:
    refused = hostile.as_user("sbatch", "-o", "/dev/null", *HINTS, "--gpus=a100:4", "--wrap", "true")
    assert refused.returncode != 0 and "--gpus" in refused.stderr and "per node" in refused.stderr
    ok = hostile.as_user("sbatch", "-o", "/dev/null", "--gpus=a100:1", "--comment", "x", "--wrap", "true")
    assert ok.returncode == 0, ok.stderr  # an unmanaged job may ask per job


def test_the_daemon_keeps_other_features_when_it_moves_the_type() -> None:
    update = Action(ActionKind.UPDATE, 5, gpu_type="v100", gpus_per_node=2)
    (argv,) = action_commands(update, "gres:gpu:2", keep_features=("nvlink",))
    assert "Features=nvlink&v100" in argv
