"""The round trip on a real cluster with slurmdbd: replay a trace under plain Slurm, import it back from sacct,
simulate the import with slurm_fifo. The simulated avg JCT is within 10% of what the replay measured, and the
jobs start in the order Slurm started them (sacct's start times, 1-s resolution: jobs Slurm started in the same
second may come in either order). Then ``compare`` on the import answers the what-if."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from slurmplan.cli import main
from slurmplan.history.sacct import parse_sacct

pytestmark = pytest.mark.slurm

K = 30.0
CLUSTER = "a100:2x4,v100:2x4,t4:2x2"
TRACE = [  # contention on every type: jobs 3 and 6 wait for GPUs others hold
    (1, 0, "bert-large", 4, "a100", 900),
    (2, 30, "bert-large", 4, "a100", 600),
    (3, 60, "gpt2", 8, "a100", 600),
    (4, 90, "bert-large", 2, "v100", 1200),
    (5, 120, "bert-large", 4, "v100", 900),
    (6, 150, "gpt2", 4, "v100", 600),
    (7, 180, "bert-large", 2, "t4", 900),
    (8, 210, "bert-large", 2, "t4", 600),
]


def _trace(path: Path) -> Path:
    rows = [
        {"job_id": i, "arrival_time_s": t, "model": m, "gpus": g, "gpu_type": ty, "duration_s": d}
        for i, t, m, g, ty, d in TRACE
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _json(capsys) -> object:
    return json.loads(capsys.readouterr().out)


def test_replay_import_simulate_round_trip_and_what_if(acctcluster, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", acctcluster.env["SLURM_CONF"])
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1))
    trace = _trace(tmp_path / "trace.jsonl")
    argv = ["replay", "--trace", str(trace), "--policy", "slurm_fifo", "--speedup", str(K), "--json"]
    assert main([*argv, "--out", str(tmp_path / "replay")]) == 0
    replay = _json(capsys)
    assert replay["finished"] == len(TRACE)

    imported = tmp_path / "imported.jsonl"
    argv = ["trace", "import", "--sacct", "--start", start, "--accounts", "root", "--time-scale", str(K)]
    assert main([*argv, "--out", str(imported), "--json"]) == 0
    info = _json(capsys)
    assert info["jobs"] == len(TRACE) and info["cpu_only"] == 1  # the replay's CPU-only canary, counted
    names = {json.loads(line)["name"] for line in imported.read_text().splitlines()}
    assert names == {f"replay-{i}" for i, *_ in TRACE}

    argv = ["simulate", "--trace", str(imported), "--cluster", CLUSTER, "--policy", "slurm_fifo"]
    assert main([*argv, "--json", "--out", str(tmp_path / "sim")]) == 0  # plain Slurm: every tick a round
    (sim,) = _json(capsys)
    assert sim["finished"] == len(TRACE) and sim["round_s"] == 30.0
    assert sim["avg_jct_h"] == pytest.approx(replay["avg_jct_h"], rel=0.10)

    history = parse_sacct(acctcluster.run("sacct", "--json", "-a", "-S", start).stdout)
    real = {j.job_id: j.start for j in history.jobs if j.name.startswith("replay-") and j.name != "replay-canary"}
    rows = (tmp_path / "sim" / "jobs_slurm_fifo.csv").read_text().splitlines()[1:]
    simulated = {int(r.split(",")[0]): float(r.split(",")[2]) for r in rows}
    assert set(simulated) == set(real)
    for a in real:
        for b in real:
            if real[a] < real[b]:  # Slurm started a first (a second or more before b)
                assert simulated[a] <= simulated[b], (a, b, real, simulated)

    argv = ["compare", "--trace", str(imported), "--cluster", CLUSTER, "--policies", "slurm_fifo,slurmplan"]
    assert main([*argv, "--json", "--workers", "1", "--no-progress"]) == 0
    what_if = _json(capsys)
    assert [s["policy"] for s in what_if] == ["slurm_fifo", "slurmplan"]
    assert all(s["finished"] == len(TRACE) for s in what_if)
