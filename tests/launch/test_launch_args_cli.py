"""``slurmplan launch-args`` as a job script calls it (a real subprocess, a clean environment): no plan fails
unless ``--default-ok``; partial ``SLURMPLAN_*`` variables agree with the GPU count or name what is missing;
Megatron-DeepSpeed never gets Megatron-LM's virtual-stage flag; the precision follows the GPU type."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slurmplan.domain import Plan, ValidationError
from slurmplan.launch.adapters import megatron_deepspeed_args, precision_for

TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "deepspeed.sbatch"


def _launch_args(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMPLAN_"))}
    cmd = [sys.executable, "-m", "slurmplan.cli", "launch-args", *args]
    return subprocess.run(cmd, env={**clean, **env}, capture_output=True, text=True, timeout=120)


def test_no_plan_fails_unless_default_ok() -> None:
    for kind in ("megatron", "deepspeed", "torchrun"):
        proc = _launch_args(kind)
        assert proc.returncode == 1 and proc.stdout == ""
        assert "no plan found" in proc.stderr and "--default-ok" in proc.stderr
    ok = _launch_args("torchrun", "--default-ok")
    assert ok.returncode == 0 and "--nproc-per-node 1" in ok.stdout


def test_partial_variables_follow_the_gpu_count() -> None:
    proc = _launch_args("torchrun", SLURMPLAN_GPUS="8")
    assert proc.returncode == 0 and "--nproc-per-node 8" in proc.stdout, proc.stderr
    proc = _launch_args("megatron", SLURMPLAN_GPUS="8", SLURMPLAN_TP="2")
    assert proc.returncode == 0 and "--tensor-model-parallel-size 2" in proc.stdout
    assert "--global-batch-size 4" in proc.stdout  # dp 4 x mb 1 x ga 1
    missing = _launch_args("torchrun", SLURMPLAN_MICRO_BATCH="4")
    assert missing.returncode == 1 and "SLURMPLAN_DP" in missing.stderr and "SLURMPLAN_MICRO_BATCH" in missing.stderr
    odd = _launch_args("torchrun", SLURMPLAN_GPUS="8", SLURMPLAN_TP="3")
    assert odd.returncode == 1 and "SLURMPLAN_GPUS" in odd.stderr and "multiple of" in odd.stderr


def test_megatron_deepspeed_never_gets_the_megatron_lm_virtual_stage_flag() -> None:
    plan = Plan(dp=1, pp=3, grad_accum=3, virtual_stages=2)
    with pytest.raises(ValidationError, match="num_layers"):
        megatron_deepspeed_args(plan, "ds.json")
    args = megatron_deepspeed_args(plan, "ds.json", num_layers=24)
    assert "--num-virtual-stages-per-pipeline-rank" not in args
    assert args[args.index("--num-layers-per-virtual-pipeline-stage") + 1] == "4"  # 24 layers / (3 stages * 2)
    proc = _launch_args("megatron-deepspeed", SLURMPLAN_DP="1", SLURMPLAN_PP="3", SLURMPLAN_VIRTUAL_STAGES="2")
    assert proc.returncode == 1 and "--num-layers" in proc.stderr


def test_precision_from_the_gpu_type() -> None:
    assert [precision_for(g) for g in ("v100", "t4", "p100", "k80", "a100", "h100", "l40s")] == [
        "fp16", "fp16", "fp16", "fp32", "bf16", "bf16", "bf16"
    ]  # fmt: skip
    assert _launch_args("precision", SLURMPLAN_DP="4", SLURMPLAN_GPU_TYPE="t4").stdout.strip() == "fp16"
    assert _launch_args("precision", "--gpu-type", "a100").stdout.strip() == "bf16"
    bad = _launch_args("precision", "--gpu-type", "z9")
    assert bad.returncode == 1 and "z9" in bad.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("gpu", "bf16", "fp16"), [("v100", "false", "true"), ("a100", "true", "false")])
def test_deepspeed_template_chooses_the_precision(tmp_path: Path, gpu: str, bf16: str, fp16: str) -> None:
    """Runs the template's config-writing part for real, with a stand-in for the training launch."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).write_text("#!/bin/sh\necho node1\n")
        (bin_dir / tool).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMPLAN_"))}
    env.update(PATH=f"{bin_dir}:{Path(sys.executable).parent}:{env['PATH']}", TRAIN_SCRIPT="train.py",
               SLURM_NNODES="1", SLURM_NTASKS_PER_NODE="4", SLURM_JOB_ID="77", SLURM_JOB_NODELIST="node1",
               SLURM_JOB_NAME="t", SLURM_SUBMIT_DIR=str(tmp_path), HOME=str(tmp_path),
               SLURMPLAN_DP="4", SLURMPLAN_GPUS="4", SLURMPLAN_GPU_TYPE=gpu)  # fmt: skip
    proc = subprocess.run(["bash", str(TEMPLATE)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    config = json.loads((tmp_path / "ds_config-77.json").read_text())
    assert config["bf16"]["enabled"] is (bf16 == "true") and config["fp16"]["enabled"] is (fp16 == "true")


def test_torchrun_nodes_and_rendezvous_come_from_the_allocation() -> None:
    """Issue 29 item 5: a 2-node job printed --nnodes 1 and 127.0.0.1:29500 even with SLURM_NNODES=2."""
    env = {"SLURMPLAN_GPUS": "8", "SLURM_JOB_ID": "1234", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2"}
    proc = _launch_args("torchrun", "--json", SLURM_JOB_NODELIST="localhost,other-node", **env)
    args = json.loads(proc.stdout)
    flag = {args[i]: args[i + 1] for i in range(0, len(args), 2)}
    assert (flag["--nnodes"], flag["--nproc-per-node"]) == ("2", "4"), proc.stderr
    assert flag["--rdzv-endpoint"] == f"localhost:{20000 + 1234 % 20000}" and flag["--rdzv-id"] == "1234"
    explicit = _launch_args("torchrun", "--nodes", "1", "--rdzv-endpoint", "h:1", SLURM_JOB_NODELIST="x", **env)
    assert "--nnodes 1 --nproc-per-node 8" in explicit.stdout and "--rdzv-endpoint h:1" in explicit.stdout


@pytest.mark.slurm
def test_torchrun_args_in_a_real_two_node_job(devcluster, tmp_path: Path) -> None:  # noqa: ANN001
    out = tmp_path / "args.json"
    script = f"unset SLURMPLAN_DP\n{sys.executable} -m slurmplan.cli launch-args torchrun --default-ok --json > {out}\n"
    job = devcluster.sbatch(script, "-N2", "--time=2", f"--output={tmp_path / 'job.out'}")
    final = devcluster.wait_state(job, "COMPLETED", "FAILED", "CANCELLED", timeout=120)
    assert final["job_state"] == "COMPLETED", (tmp_path / "job.out").read_text()
    args = json.loads(out.read_text())
    flag = {args[i]: args[i + 1] for i in range(0, len(args), 2)}
    assert flag["--nnodes"] == "2" and flag["--rdzv-id"] == str(job)
    assert flag["--rdzv-endpoint"].endswith(f":{20000 + job % 20000}")
