"""Prometheus metrics: a real daemon on the real cluster, scraped over 127.0.0.1 and read from its textfile."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurmplan.control.metrics import DaemonMetrics
from slurmplan.control.runner import Daemon
from slurmplan.policy.registry import load_policy
from slurmplan.slurm.backend import SlurmBackend
from tests.control.conftest import SIGNAL_AWARE, Rig

pytestmark = pytest.mark.slurm

HINT = "slurmplan:model=gpt2;gpus=1;min=1;max=1"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_metrics_from_real_ticks(rig: Rig, tmp_path: Path) -> None:
    metrics = DaemonMetrics()
    daemon = Daemon(
        rig.config,
        backend=metrics.wrap_backend(SlurmBackend(env=rig.handle.env)),
        policy=metrics.wrap_policy(load_policy(rig.config.policy)),
    )
    job = rig.submit(SIGNAL_AWARE, "--hold", "--gres=gpu:1", "--comment", HINT, seconds=60)
    report = daemon.tick()
    metrics.observe_tick(report, rig.config)
    rig.handle.wait_state(job, "RUNNING")
    with rig.journal() as j:
        decision = j.decisions.of(job)[-1]
    # The job reports its throughput the way the launcher does: 25% below the prediction it was scheduled on.
    report_dir = Path(rig.config.report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    line = {
        "job_id": job,
        "model": "gpt2",
        "gpu_type": decision["cell"].split("x")[0],
        "gpus": 1,
        "nodes": 1,
        "plan": {"dp": 1},
        "samples_per_s": decision["throughput"] / 1.25,
        "memory_gb": 1.0,
        "time": time.time(),  # before the next tick, which may re-predict from this very report
    }
    (report_dir / f"{job}.jsonl").write_text(json.dumps(line) + "\n")
    metrics.observe_tick(daemon.tick(), rig.config)
    path = tmp_path / "slurmplan.prom"
    metrics.write_textfile(path)

    s = _samples(path.read_text())
    assert _value(s, "slurmplan_ticks_total", result="ok") == 2
    assert _value(s, "slurmplan_slurm_calls_total", call="snapshot", result="ok") >= 2
    assert _value(s, "slurmplan_slurm_calls_total", call="release", result="ok") == 1
    assert _value(s, "slurmplan_actions_total", kind="release") == 1
    assert sum(v for (n, _), v in s.items() if n == "slurmplan_decisions_total") >= 1
    assert _value(s, "slurmplan_policy_solve_seconds_count") >= 1
    assert _value(s, "slurmplan_tick_phase_seconds_count", phase="decide") == 2
    assert _value(s, "slurmplan_held_jobs") == 0
    assert _value(s, "slurmplan_throughput_prediction_error_ratio_count") == 1
    assert _value(s, "slurmplan_throughput_prediction_error_ratio_sum") == pytest.approx(0.25, abs=1e-6)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_daemon_serves_metrics_and_writes_the_textfile(rig: Rig, tmp_path: Path) -> None:
    config = tmp_path / "slurmplan.yaml"
    config.write_text(f"database: {rig.config.database}\nreport_dir: {tmp_path}/reports\nround_s: 20\n")
    port, textfile = _free_port(), tmp_path / "textfile" / "slurmplan.prom"
    held = rig.submit(SIGNAL_AWARE, "--hold", "--gres=gpu:1", "--comment", HINT, seconds=60)
    argv = ["daemon", "--config", str(config), "--interval", "1", "--quiet", "--metrics-port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "slurmplan.cli", *argv, "--metrics-textfile", str(textfile)],
        env={**os.environ, **rig.handle.env},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        scraped: dict = {}
        while time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                body = ""
            scraped = _samples(body) if body else {}
            if scraped.get(("slurmplan_ticks_total", (("result", "ok"),)), 0) >= 2:
                break
            time.sleep(0.5)
        assert _value(scraped, "slurmplan_ticks_total", result="ok") >= 2
        assert _value(scraped, "slurmplan_daemon_starts") >= 1
        assert _value(scraped, "slurmplan_slurm_calls_total", call="release", result="ok") == 1
        rig.handle.wait_state(held, "RUNNING")
        assert _value(_samples(textfile.read_text()), "slurmplan_ticks_total", result="ok") >= 2
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
