"""The sbatch templates on the site cluster: their hints are accepted and canonical, and the plan the daemon
assigns reaches the training command as the right flags.

Megatron-LM and DeepSpeed are not installed here, so their templates run a stand-in training script (written
by the test) that records the arguments, environment and config it was given; everything around it (sbatch,
the #SBATCH plan options, job_submit.lua, the SPANK plugin, srun) is the real thing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from site_cluster import ROOT, SiteCluster

from slurmplan.domain import Action, ActionKind, Cell, Plan
from slurmplan.formats import compose_admin_comment, format_decision, parse_hints
from slurmplan.slurm.backend import action_commands

pytestmark = pytest.mark.slurm

TEMPLATES = ROOT / "templates"
FIT = ("--nodes=1", "--ntasks-per-node=2", "--cpus-per-task=2", "--time=00:10:00")
"""Overrides so each template fits a 2-GPU slice of the development cluster."""
ELASTIC_FIT = ("--time=00:10:00",)
"""The elastic template sizes its tasks from the GPUs it holds (--cpus-per-gpu), so only the time changes."""


def fit(name: str) -> tuple[str, ...]:
    return ELASTIC_FIT if name == "elastic_dp.sbatch" else FIT


EXPECTED = {
    "elastic_dp.sbatch": "slurmplan:model=vit-b;min=2;max=8;types=a100,v100;workers=8;batch=256;steps=20000",
    "megatron.sbatch": (
        "slurmplan:model=megatron-1.7b;min=8;max=32;types=a100,h100;class=guaranteed;batch=512;seq=2048;steps=100000"
    ),
    "deepspeed.sbatch": (
        "slurmplan:model=bert-large;gpus=4;types=v100,a100,t4;batch=1024;seq=512;steps=50000;deadline=2030-01-01T00:00"
    ),
}

STAND_IN = textwrap.dedent(
    """\
    import json, os, sys
    rank = os.environ.get("RANK", "?")
    record = {"argv": sys.argv[1:], "rank": rank, "world": os.environ.get("WORLD_SIZE"),
              "env": {k: v for k, v in os.environ.items() if k.startswith("SLURMPLAN_")}}
    if "--deepspeed_config" in sys.argv:
        record["config"] = json.load(open(sys.argv[sys.argv.index("--deepspeed_config") + 1]))
    with open(os.path.join(os.environ["RECORD_DIR"], f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    """
)


@pytest.fixture
def workdir(site: SiteCluster, request: pytest.FixtureRequest) -> Path:
    """A directory for one test in the site cluster's own tree (pytest's may be pruned by concurrent sessions)."""
    path = site.tmp / request.node.name.replace("[", "-").replace("]", "")
    path.mkdir()
    return path


def test_every_template_has_an_expected_hint_line() -> None:
    assert sorted(p.name for p in TEMPLATES.glob("*.sbatch")) == sorted(EXPECTED)
    for name, text in EXPECTED.items():
        parse_hints(text)  # the expectation itself is valid grammar
        body = (TEMPLATES / name).read_text()
        assert "#SBATCH --requeue" in body and "#SBATCH --signal=B:USR2@" in body, name
        assert body.index("\ntrap '") < body.index("\nset -euo pipefail"), f"{name}: trap the signal first"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_template_hints_become_canonical_admin_comment(site: SiteCluster, name: str) -> None:
    gpu_type = "v100" if name == "deepspeed.sbatch" else "a100"
    job_id = site.sbatch(TEMPLATES / name, *fit(name), f"--gres=gpu:{gpu_type}:2")
    job = site.wait_state(job_id, "PENDING")
    # job_submit.lua made the typed request movable and recorded what was asked (site/README.md)
    assert job["admin_comment"] == f"{EXPECTED[name]};asked={gpu_type}:2;nodes=1"  # --nodes=1 recorded
    assert (job["tres_per_node"], job["features"]) == ("gres:gpu:2", gpu_type)
    assert job["priority"] == 0
    site.run("scancel", str(job_id), check=True)


def _release_as_decided(
    site: SiteCluster, job_id: int, name: str, cell: Cell, plan: Plan, stamp: str = "round 1"
) -> None:
    """Wait for the held job, then release it as the daemon does: its hints, then the decision, in its admin comment."""
    site.wait_state(job_id, "PENDING")
    site.release_with(job_id, compose_admin_comment(EXPECTED[name], format_decision(cell, plan, stamp)))


def _finished(site: SiteCluster, job_id: int, output: Path, timeout: float) -> tuple[dict, str]:
    """The job once it completed or failed, and its output."""
    job = site.wait_state(job_id, "COMPLETED", "FAILED", timeout=timeout)
    return job, output.read_text() if output.exists() else "<no output>"


def _run_with_plan(site: SiteCluster, name: str, gres: str, cell: Cell, plan: Plan, tmp: Path, **env: str) -> dict:
    record_dir = tmp / "records"
    record_dir.mkdir()
    job_id = site.sbatch(TEMPLATES / name, *FIT, gres, f"--chdir={site.jobs_dir}", RECORD_DIR=str(record_dir), **env)
    _release_as_decided(site, job_id, name, cell, plan, "round 3")
    job, log = _finished(site, job_id, site.jobs_dir / f"{name.split('.')[0].replace('_', '-')}-{job_id}.out", 90)
    assert job["job_state"] == "COMPLETED", log
    records = {p.name: json.loads(p.read_text()) for p in record_dir.glob("rank*.json")}
    assert sorted(records) == ["rank0.json", "rank1.json"], log
    return records["rank0.json"]


def test_megatron_template_turns_the_plan_into_megatron_flags(site: SiteCluster, workdir: Path) -> None:
    megatron = workdir / "megatron"
    megatron.mkdir()
    (megatron / "pretrain_gpt.py").write_text(STAND_IN)
    # Two stages: Megatron-LM does not interleave them (launch.adapters), so no virtual-stage flag; the adapter's
    # own tests cover interleaving on three stages or more.
    plan = Plan(dp=1, tp=1, pp=2, micro_batch=2, grad_accum=16, checkpointing=True, zero_stage=1)
    rec = _run_with_plan(
        site, "megatron.sbatch", "--gres=gpu:a100:2", Cell("a100", 2, 2), plan, workdir,
        MEGATRON=str(megatron), DATA="/data/none", CKPT=str(workdir / "ckpt"),
    )  # fmt: skip
    argv = rec["argv"]

    def flag(name: str) -> str:
        return argv[argv.index(name) + 1]

    assert (flag("--tensor-model-parallel-size"), flag("--pipeline-model-parallel-size")) == ("1", "2")
    assert (flag("--micro-batch-size"), flag("--global-batch-size")) == ("2", "32")
    assert "--num-layers-per-virtual-pipeline-stage" not in argv
    assert flag("--recompute-granularity") == "full" and "--use-distributed-optimizer" in argv
    assert rec["world"] == "2" and rec["env"]["SLURMPLAN_PLAN_SOURCE"] == "admin-comment"


def test_deepspeed_template_writes_the_plan_into_its_config(site: SiteCluster, workdir: Path) -> None:
    script = workdir / "train.py"
    script.write_text(STAND_IN)
    plan = Plan(dp=2, micro_batch=4, grad_accum=8, zero_stage=2, offload=True)
    rec = _run_with_plan(
        site, "deepspeed.sbatch", "--gres=gpu:v100:2", Cell("v100", 2), plan, workdir,
        TRAIN_SCRIPT=str(script), CKPT=str(workdir / "ckpt"),
    )  # fmt: skip
    config = rec["config"]
    assert config["train_batch_size"] == 64
    assert (config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"]) == (4, 8)
    assert config["zero_optimization"] == {"stage": 2, "offload_optimizer": {"device": "cpu"}}
    assert config["activation_checkpointing"]["partition_activations"] is False
    assert rec["argv"][rec["argv"].index("--pipeline-parallel-size") + 1] == "1"


@pytest.mark.slow
def test_elastic_template_trains_with_the_launcher(site: SiteCluster, workdir: Path) -> None:
    """The real launcher and example target, 2 processes on CPU (gloo), a few steps."""
    pytest.importorskip("torch")
    if shutil.which("python") is None:
        pytest.skip("the template runs `python`")
    ckpt = workdir / "ckpt"
    job_id = site.sbatch(
        TEMPLATES / "elastic_dp.sbatch",
        *ELASTIC_FIT,
        "--gres=gpu:a100:2",
        f"--chdir={ROOT}",
        f"--output={workdir}/out-%j.txt",
        STEPS="4",
        CKPT=str(ckpt),
        MASTER_ADDR="127.0.0.1",  # the dev cluster's node names do not resolve
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    _release_as_decided(site, job_id, "elastic_dp.sbatch", Cell("a100", 2), Plan(dp=2, grad_accum=4))
    job, log = _finished(site, job_id, workdir / f"out-{job_id}.txt", 180)
    assert job["job_state"] == "COMPLETED", log
    assert f"elastic-dp: job {job_id} restart 0 on 2 GPUs (a100, dp 2, grad accum 4)" in log
    assert ckpt.exists() and any(ckpt.iterdir()), log


SLOW_STAND_IN = STAND_IN + "import time\ntime.sleep(60)\n"
"""Records, then trains for a minute and has no handler for USR2 (as Megatron-LM has none): the signal kills it."""


def _batch_shell_catches_usr2(site: SiteCluster, job_id: int, timeout: float = 60) -> None:
    """Wait until the job's batch shell has a USR2 handler (its first line ran: ``SigCgt`` in /proc).

    Signalled earlier, the signal is lost while slurmstepd has not started the script yet, and kills bash in the
    few milliseconds between its exec and the trap line; no script can close that window, the daemon does
    (``signal_min_run_s``). From here on the step is being started, which is the window the templates close.
    """
    script = f"{site.cluster.paths.root}/spool/"
    suffix = f"/job{job_id:05d}/slurm_script"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if not any(a.decode().startswith(script) and a.decode().endswith(suffix) for a in argv):
                    continue
                caught = next(ln for ln in (proc / "status").read_text().splitlines() if ln.startswith("SigCgt:"))
            except (OSError, StopIteration, UnicodeDecodeError):
                continue
            if int(caught.split()[1], 16) & (1 << (signal.SIGUSR2 - 1)):
                return
        time.sleep(0.002)
    raise AssertionError(f"job {job_id}: no batch shell catching USR2 within {timeout} s")


def _signal_as_the_daemon_does(site: SiteCluster, job_id: int) -> None:
    """The daemon's checkpoint signal, built by the daemon's own code (``scancel --signal=USR2 --batch``), the
    moment the batch shell can take it."""
    _batch_shell_catches_usr2(site, job_id)
    for argv in action_commands(Action(ActionKind.SIGNAL, job_id, signal="USR2")):
        site.run(*argv, check=True)


def _requeued_not_failed(site: SiteCluster, job_id: int, log: Path, timeout: float) -> dict:
    """Wait until the job is back in the queue (requeued, held) after the signal; a FAILED job fails the test."""
    try:
        job = site.wait_for(
            job_id,
            lambda j: (
                j["job_state"] in ("FAILED", "COMPLETED", "CANCELLED")
                or (j["job_state"] == "PENDING" and j["restart_cnt"] >= 1)
            ),
            timeout,
            "requeued after the checkpoint signal",
        )
    finally:
        text = log.read_text() if log.exists() else "<no output>"
        print(text)  # pytest shows it when the test fails
    assert (job["job_state"], job["restart_cnt"]) == ("PENDING", 1), text
    assert job["priority"] == 0, "requeued held: the daemon decides where it runs next"
    return job


@pytest.mark.parametrize("name", ["megatron.sbatch", "deepspeed.sbatch"])
def test_template_signalled_the_moment_it_runs_is_requeued_not_failed(
    site: SiteCluster, workdir: Path, name: str
) -> None:
    """The daemon may signal a job it started a moment ago. The batch shell traps the signal from its first line,
    forwards it to the training step once that exists, and requeues the job when the step ends; before, USR2
    killed the batch shell and the job FAILED (ExitCode 0:12) whenever the daemon moved it."""
    program = workdir / "train.py"
    program.write_text(SLOW_STAND_IN)
    (workdir / "records").mkdir()
    env = {"MEGATRON": str(workdir), "DATA": "/data/none"} if name == "megatron.sbatch" else {}
    if name == "megatron.sbatch":
        (workdir / "pretrain_gpt.py").write_text(SLOW_STAND_IN)
    gres = "--gres=gpu:a100:2" if name == "megatron.sbatch" else "--gres=gpu:v100:2"
    log = workdir / "out.txt"
    job_id = site.sbatch(
        TEMPLATES / name, *FIT, gres, f"--chdir={site.jobs_dir}", f"--output={log}",
        RECORD_DIR=str(workdir / "records"), TRAIN_SCRIPT=str(program), CKPT=str(workdir / "ckpt"), **env,
    )  # fmt: skip
    cell = Cell("a100", 2, 2) if name == "megatron.sbatch" else Cell("v100", 2)
    plan = Plan(dp=1, pp=2, micro_batch=2, grad_accum=16) if name == "megatron.sbatch" else Plan(dp=2, grad_accum=8)
    _release_as_decided(site, job_id, name, cell, plan)
    _signal_as_the_daemon_does(site, job_id)  # as soon as it runs
    _requeued_not_failed(site, job_id, log, timeout=90)
    assert "checkpoint signal: requeueing the job" in log.read_text()
    site.run("scancel", str(job_id), check=True)


@pytest.mark.slow
def test_elastic_template_signalled_the_moment_it_runs_checkpoints_and_requeues(
    site: SiteCluster, workdir: Path
) -> None:
    """The real launcher: the signal reaches the tasks while Python is still starting (blocked by
    ``env --block-signal`` until the launcher's first line takes it), so they checkpoint after the first step and
    the launcher requeues the job held."""
    pytest.importorskip("torch")
    ckpt, log = workdir / "ckpt", workdir / "out.txt"
    job_id = site.sbatch(
        TEMPLATES / "elastic_dp.sbatch", *ELASTIC_FIT, "--gres=gpu:a100:2", f"--chdir={ROOT}", f"--output={log}",
        STEPS="200", CKPT=str(ckpt), MASTER_ADDR="127.0.0.1",
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )  # fmt: skip
    _release_as_decided(site, job_id, "elastic_dp.sbatch", Cell("a100", 2), Plan(dp=2, grad_accum=4))
    _signal_as_the_daemon_does(site, job_id)  # as soon as it runs
    _requeued_not_failed(site, job_id, log, timeout=240)
    text = log.read_text()
    # Taken either while Python starts (blocked, then "arrived while starting up") or, when the template forwards it
    # a little later (a loaded machine: the trap gives a young srun a second), by the installed handler.
    assert "arrived while starting up" in text or "checkpoint on SIGUSR2" in text, text
    assert "DUE TO JOB REQUEUE' and 'Terminated' lines that follow are expected" in text  # issue 29 item 12
    steps = sorted(p.name for p in ckpt.iterdir() if p.name.startswith("step-"))
    assert steps and steps[-1] < "step-00000200", text  # stopped early, after a checkpoint
    site.run("scancel", str(job_id), check=True)


def _shipped_env(workdir: Path, **extra: str) -> dict[str, str]:
    """Only the environment of a user's shell: the script file itself is the one in templates/, unchanged."""
    return {
        "HOME": str(workdir),  # the template's default checkpoint folder is under $HOME
        "TRAIN": f"{TEMPLATES}/example_train.py:make_spec",
        "MASTER_ADDR": "127.0.0.1",  # the dev cluster's node names do not resolve
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        **extra,
    }


@pytest.mark.slow
def test_elastic_template_as_shipped_trains_on_four_gpus(site: SiteCluster, workdir: Path) -> None:
    """``sbatch --export=ALL,STEPS=.. templates/elastic_dp.sbatch`` exactly as README says: no option overridden.
    Before, the example's max_p=4 against --plan-workers=8 failed every run on more than 4 GPUs; the template now
    passes --max-p 8, so 4 processes (2 logical workers each) train, in a checkpoint folder of the job's own."""
    pytest.importorskip("torch")
    job_id = site.sbatch(TEMPLATES / "elastic_dp.sbatch", f"--chdir={workdir}", **_shipped_env(workdir, STEPS="3"))
    job = site.wait_state(job_id, "PENDING")
    assert job["admin_comment"] == f"{EXPECTED['elastic_dp.sbatch']};asked=a100:4;nodes=1"
    _release_as_decided(site, job_id, "elastic_dp.sbatch", Cell("a100", 4), Plan(dp=4, grad_accum=2))
    job, log = _finished(site, job_id, workdir / f"elastic-dp-{job_id}.out", 240)
    assert job["job_state"] == "COMPLETED", log
    assert f"elastic-dp: job {job_id} restart 0 on 4 GPUs (a100, dp 4" in log
    ckpt = workdir / "checkpoints" / f"elastic-dp-{job_id}"  # keyed on the job id, kept across requeues
    assert (ckpt / "step-00000003").is_dir() and json.loads((ckpt / "owner.json").read_text())["job"] == str(job_id)
    import torch

    state = torch.load(ckpt / "step-00000003" / "state.pt", weights_only=False)
    assert (state["max_p"], state["world_size"]) == (8, 4)  # the job's 8 workers: it may grow to 8 GPUs later


@pytest.mark.slow
def test_elastic_template_with_a_max_p_other_than_its_workers_says_what_to_change(
    site: SiteCluster, workdir: Path
) -> None:
    """A script whose max_p differs from --plan-workers stops at start with one line (not one per rank) that
    names the fix, instead of failing later on the first resize beyond max_p."""
    pytest.importorskip("torch")
    env = _shipped_env(workdir, STEPS="3", WORKERS="4")
    job_id = site.sbatch(TEMPLATES / "elastic_dp.sbatch", f"--chdir={workdir}", **env)
    _release_as_decided(site, job_id, "elastic_dp.sbatch", Cell("a100", 2), Plan(dp=2, grad_accum=4))
    job, log = _finished(site, job_id, workdir / f"elastic-dp-{job_id}.out", 180)
    assert job["job_state"] == "FAILED", log
    assert log.count("pass --max-p 8 to the training script, or submit with --plan-workers=4") == 1, log


@pytest.mark.parametrize("name", ["deepspeed.sbatch", "megatron.sbatch"])
def test_framework_templates_as_shipped_are_accepted_and_held(site: SiteCluster, name: str) -> None:
    """Submitted as shipped; megatron.sbatch asks for 8 GPUs on each of 2 nodes and the dev cluster's nodes have
    4, so for it alone the per-node size is lowered (and only that)."""
    fit = ("--gres=gpu:a100:4", "--ntasks-per-node=4") if name == "megatron.sbatch" else ()
    job_id = site.sbatch(TEMPLATES / name, *fit, f"--chdir={site.jobs_dir}")
    job = site.wait_state(job_id, "PENDING")
    asked = "a100:4" if name == "megatron.sbatch" else "v100:4"
    nodes = 2 if name == "megatron.sbatch" else 1  # each template's own #SBATCH --nodes
    assert job["admin_comment"] == f"{EXPECTED[name]};asked={asked};nodes={nodes}"
    assert job["priority"] == 0
    site.run("scancel", str(job_id), check=True)
