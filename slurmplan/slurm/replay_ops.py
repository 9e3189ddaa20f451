"""The Slurm-facing and process-facing operations of ``slurmplan replay``, kept in the one room that starts processes.

The replay harness (``slurmplan.replay``) submits jobs as a user would, watches them, runs the real daemon as a
child process, and injects faults (the daemon SIGKILLed, slurmctld restarted, scontrol failing). Each of those
starts or kills a process, so each lives here; the harness only calls these functions.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmplan.domain import SLURM_CRED_EXPIRE_S
from slurmplan.slurm import procs
from slurmplan.slurm.reader import JobRecord, SlurmOutputError, read_jobs, read_show_config
from slurmplan.slurm.run import SlurmCommandError, run_slurm, slurm_env
from slurmplan.slurm.site_check import check_job_submit

log = logging.getLogger(__name__)


def sbatch(script: Path, options: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Submit ``script`` with ``options``; returns the job id. Raises :class:`SlurmCommandError` on refusal."""
    proc = run_slurm(["sbatch", "--parsable", *options, str(script)], env, timeout=60)
    return int(proc.stdout.strip().split(";")[0])


def scancel(job_ids: Iterable[int], env: Mapping[str, str] | None = None) -> None:
    """Cancel jobs (never raises: used on the way out, Ctrl-C included)."""
    ids = [str(j) for j in job_ids]
    if not ids:
        return
    try:
        run_slurm(["scancel", *ids], env, timeout=30, check=False)
    except (SlurmCommandError, OSError) as exc:
        log.warning("scancel failed: %s", exc)


def squeue_all(env: Mapping[str, str] | None = None) -> tuple[JobRecord, ...] | None:
    """Every job Slurm still remembers (``squeue --json --states=all``), or None when Slurm does not answer."""
    try:
        proc = run_slurm(["squeue", "--json", "--states=all"], env, timeout=30, check=False)
    except (SlurmCommandError, OSError):
        return None
    if proc.returncode != 0:
        return None
    try:
        return read_jobs(json.loads(proc.stdout), skip_bad=True)
    except (json.JSONDecodeError, SlurmOutputError):
        return None


def running_config(env: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The controller's ``scontrol show config``, read once per replay; None when it cannot be read."""
    try:
        return read_show_config(env)
    except (SlurmCommandError, SlurmOutputError, OSError):
        return None


def auth_cred_expire_s(conf: Mapping[str, str] | None) -> float:
    """``cred_expire`` of the cluster's AuthInfo (120 s when not set or unread): how long a requeued job waits to
    start."""
    if conf is None:
        return SLURM_CRED_EXPIRE_S
    for part in conf.get("AuthInfo", "").split(","):
        name, _, number = part.strip().partition("=")
        if name == "cred_expire" and number.isdigit():
            return float(number)
    return SLURM_CRED_EXPIRE_S


def site_holds_jobs(conf: Mapping[str, str] | None) -> bool:
    """True when the cluster runs slurmplan's job_submit.lua (``slurmplan site install``, the same test as
    ``site check``): it holds managed jobs for the daemon itself, and marks a job submitted with ``--hold`` as its
    user's own hold, which the daemon never lifts (issue 24). A replay must then submit managed jobs as a user
    would, without ``--hold``. An unread configuration reads as no."""
    return conf is not None and check_job_submit(conf).ok


@dataclass
class DaemonProcess:
    """The real daemon (``python -m slurmplan.cli daemon``) run as a child, restartable after a kill."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> None:
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                start_new_session=True,
            )  # fmt: skip
        self.starts += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as an OOM killer or a crash would: no clean-up runs."""
        if self.alive():
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def daemon_process(
    config: Path, env: Mapping[str, str], log_path: Path, path_prefix: Path | None = None
) -> DaemonProcess:
    """The daemon's command with ``config``; ``path_prefix`` is put first on its PATH (the scontrol wrapper)."""
    full = slurm_env(env)
    if path_prefix is not None:
        full["PATH"] = f"{path_prefix}{os.pathsep}{full.get('PATH', '')}"
    argv = [sys.executable, "-m", "slurmplan.cli", "daemon", "--config", str(config), "--quiet"]
    return DaemonProcess(argv, full, log_path)


FAILING_SCONTROL = """#!/bin/sh
# slurmplan replay fault: a real scontrol that fails with probability {p} (exit 1, message on stderr).
if [ "$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')" -lt {threshold} ]; then
  echo "scontrol: error: injected failure (slurmplan replay --faults fail-scontrol)" >&2
  echo 1 >> {count}
  exit 1
fi
exec {real} "$@"
"""


def write_failing_scontrol(folder: Path, probability: float) -> Path:
    """A wrapper ``scontrol`` in ``folder`` that fails (a real failing process) with ``probability``."""
    real = subprocess.run(["sh", "-c", "command -v scontrol"], capture_output=True, text=True).stdout.strip()
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "scontrol"
    threshold = int(max(0.0, min(1.0, probability)) * 65536)
    wrapper.write_text(
        FAILING_SCONTROL.format(p=probability, threshold=threshold, real=real or "scontrol", count=folder / "failed")
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def restart_slurmctld(env: Mapping[str, str], timeout: float = 60.0) -> bool:
    """Stop the slurmctld that reads this cluster's ``SLURM_CONF`` and start it again with the same command.

    Returns False (and changes nothing) when no such slurmctld runs on this host. The new pid is written to a
    dev cluster's pid file when there is one, so ``devcluster down`` still finds it.
    """
    conf = slurm_env(env).get("SLURM_CONF", "")
    pid = next(
        (p for p in procs.all_pids() if procs.comm(p) == "slurmctld" and conf and conf in procs.cmdline(p)), None
    )
    if pid is None:
        return False
    argv = procs.cmdline(pid).split()
    child_env = procs.environ(pid)
    os.kill(pid, signal.SIGTERM)
    if procs.wait_gone([pid], timeout):
        os.kill(pid, signal.SIGKILL)
        procs.wait_gone([pid], 10)
    root = Path(conf).parent.parent
    log_dir = root / "log" if (root / "log").is_dir() else Path(conf).parent
    with open(log_dir / "slurmctld.out", "ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=child_env or slurm_env(env),
            start_new_session=True,
        )  # fmt: skip
    pid_file = root / "run" / "slurmctld.pid"
    if pid_file.parent.is_dir():
        pid_file.write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if run_slurm(["scontrol", "ping"], env, timeout=10, check=False).stdout.count("UP"):
                return True
        except SlurmCommandError:
            pass
        time.sleep(0.5)
    log.warning("slurmctld did not answer %g s after its restart", timeout)
    return True
