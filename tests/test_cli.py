"""The ``slurmplan`` command itself, run as a user runs it: a real process, a real pipe, a real terminal (tmux)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import slurmplan

ROOT = Path(slurmplan.__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
CLI = f"{sys.executable} -m slurmplan.cli"


def _sh(command: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=ENV, timeout=120, **kw)


@pytest.mark.parametrize("args", ["policies", "policies --json", "trace check --json {trace}", "--help"])
def test_output_piped_to_a_reader_that_stops_early_ends_quietly(args: str, tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    assert _sh(f"{CLI} trace generate gavel-single --jobs 3 --out {trace}").returncode == 0
    # ``head -n 0`` exits without reading, so every write of ours meets a closed pipe.
    r = _sh(f"set -o pipefail; {CLI} {args.format(trace=trace)} | head -n 0")
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    assert r.stderr == ""


def test_json_piped_to_head_in_a_terminal(tmp_path: Path) -> None:
    """The case the issue met: ``... --json | head -1`` typed in a terminal, progress bar on the terminal."""
    if not shutil.which("tmux"):
        pytest.fail("tmux is needed (site/quickstart/test.sh installs it)")
    trace = tmp_path / "t.jsonl"
    assert _sh(f"{CLI} trace generate gavel-single --jobs 30 --rate 20 --out {trace}").returncode == 0
    session = f"sp-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "done"
    sim = f"PYTHONPATH={ROOT} {CLI} simulate --policy las --cluster v100:4,k80:4 --trace {trace}"
    # first with the progress bar on the terminal and the table after it, then --json into head
    cmd = f"cd {ROOT} && {sim}; {sim} --json | head -1; echo rc=${{PIPESTATUS[0]}} > {done}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", "bash", "--norc"], check=True)
    try:
        subprocess.run(["tmux", "send-keys", "-t", session, cmd, "Enter"], check=True)
        deadline = time.monotonic() + 120
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.3)
        capture = ["tmux", "capture-pane", "-p", "-t", session, "-S", "-200"]
        pane = subprocess.run(capture, capture_output=True, text=True)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    assert done.exists(), pane.stdout
    assert "Traceback" not in pane.stdout and "BrokenPipe" not in pane.stdout, pane.stdout
    lines = [line.strip() for line in pane.stdout.splitlines()]
    assert "[" in lines and "Running HiGHS" not in pane.stdout  # head's one line is the JSON's first
    # the progress bar is gone once the run ends: the table starts at the beginning of its line, nothing left over
    assert any(line.startswith("policy ") for line in pane.stdout.splitlines()), pane.stdout
    assert "simulating" not in pane.stdout and "job/s" not in pane.stdout, pane.stdout


def test_simulate_json_stdout_is_only_json(tmp_path: Path) -> None:
    """HiGHS prints a banner on fd 1 the first time it is used; it must not land in --json output."""
    import json

    trace = tmp_path / "t.jsonl"
    assert _sh(f"{CLI} trace generate gavel-single --jobs 4 --out {trace}").returncode == 0
    r = _sh(f"{CLI} simulate --policy las --cluster v100:2,k80:2 --trace {trace} --json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["policy"] == "las"


def test_version() -> None:
    r = _sh(f"{CLI} --version")
    assert r.returncode == 0 and r.stdout.strip() == f"slurmplan {slurmplan.__version__}"


def _subparsers(parser, path=()):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _subparsers(sub, (*path, name))


def test_every_subcommand_has_a_description_and_no_rst_markup() -> None:
    from slurmplan.cli import build_parser

    seen = []
    for path, sub in _subparsers(build_parser()):
        text = sub.format_help()
        seen.append(path)
        assert sub.description, f"slurmplan {' '.join(path)} --help has no description"
        assert "``" not in text and ":func:`" not in text and ":class:`" not in text, (path, text)
    for wanted in ("simulate", "compare", "tick", "daemon", "explain", "history", "trace", "site"):
        assert (wanted,) in seen


def test_help_imports_no_solver_or_framework() -> None:
    """A fact, not a timing (the timing is benchmarks/bench_startup.py): --help must not import these."""
    probe = (
        "import sys; from slurmplan.cli import build_parser; build_parser().format_help(); "
        "print(' '.join(m for m in ('cvxpy', 'torch', 'scipy', 'matplotlib', 'sqlite_utils') if m in sys.modules))"
    )
    r = _sh(f'{sys.executable} -c "{probe}"')
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"imported by --help: {r.stdout}"


def test_listing_and_loading_policies_does_not_import_cvxpy() -> None:
    probe = (
        "import sys; from slurmplan.policy.registry import list_policies, load_policy; "
        "[load_policy(n) for n in list_policies()]; print('cvxpy' in sys.modules)"
    )
    r = _sh(f'{sys.executable} -c "{probe}"')
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stdout + r.stderr


def test_policies_and_history_tables_have_header_rows() -> None:
    from slurmplan.control.explain import format_history

    r = _sh(f"{CLI} policies")
    assert r.stdout.splitlines()[0].split() == ["NAME", "OBJECTIVE", "DESCRIPTION"]
    rows = [{"time": 1_700_000_000.0, "job_id": 7, "round": 3, "kind": "decision", "what": "kept", "detail": "x"}]
    header, line = format_history(rows).splitlines()
    assert header.split()[:4] == ["TIME", "JOBID", "ROUND", "KIND"]
    assert line.startswith("2023-11-1")  # a date, not only a time of day


def test_gavel_trace_default_load_is_stated_and_busy_enough(tmp_path: Path) -> None:
    r = _sh(f"{CLI} trace generate gavel-single --jobs 400 --out {tmp_path / 't.jsonl'}")
    assert r.returncode == 0, r.stderr
    assert "arrivals/h" in r.stdout and "offered load" in r.stdout
    load = float(r.stdout.split("offered load ")[1].split()[0])
    assert 0.6 <= load <= 1.0, r.stdout  # was about 0.2: every policy ran every job at once and they tied
    check = _sh(f"{CLI} trace check {tmp_path / 't.jsonl'}").stdout
    hours = check.split("last_arrival_h: ")[1].split()[0]
    assert len(hours.split(".")[1]) <= 2, check  # rounded, not 17 digits
