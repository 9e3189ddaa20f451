"""Issue 24 items 4, 6, 11 on the site cluster: who may use ``class=guaranteed``/``managed=no``/``steps``/``deadline``
is the site's to say (enforced by job_submit.lua at submission and by the daemon on every tick), text that is
not slurmplan's is not read as hints, and a hint cannot write raw control characters into slurmctld's log.

The allowlist is switched on by rewriting the cluster's job_submit.lua as ``site install`` renders it (slurmctld
reloads the script when it changes) and restored afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmplan.control.config import config_from_mapping
from slurmplan.control.observe import classify
from slurmplan.domain import JobClass
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.slurm.site import render_trust

pytestmark = pytest.mark.slurm

TRUST = {"guaranteed_accounts": ["gold"], "unmanaged_qos": ["batchonly"], "deadline_accounts": ["gold"]}


@pytest.fixture
def trusted(hostile) -> Iterator:
    lua = Path(hostile.site.env["SLURM_CONF"]).parent / "job_submit.lua"
    original = lua.read_text()
    lua.write_text(render_trust(original, config_from_mapping(TRUST).trust.rules()))
    time.sleep(1.1)  # a new mtime: slurmctld's job_submit/lua reloads the script on its next call
    try:
        yield hostile
    finally:
        lua.write_text(original)


def test_lua_refuses_guaranteed_for_an_account_not_allowed_naming_the_rule(trusted) -> None:
    refused = trusted.as_user("sbatch", "-o", "/dev/null", "--comment", "slurmplan:class=guaranteed;gpus=1",
                              "--wrap", "sleep 1")  # fmt: skip
    assert refused.returncode != 0
    assert "class=guaranteed is not allowed" in refused.stderr and "guaranteed_accounts [gold]" in refused.stderr
    deadline = trusted.as_user("sbatch", "-o", "/dev/null", "--plan-deadline=2031-01-01T00:00", "--wrap", "true")
    assert deadline.returncode != 0 and "deadline_accounts" in deadline.stderr
    ok = trusted.sbatch("--account=gold", "--comment", "slurmplan:class=guaranteed;gpus=1")  # allowed: accepted
    plain = trusted.sbatch("--comment", "slurmplan:gpus=1")  # good submissions keep being accepted
    trusted.cancel(ok, plain)


def test_the_daemon_drops_a_hint_the_jobs_account_does_not_allow(hostile) -> None:
    """A job that got past submission with ``class=guaranteed`` (job_submit.lua without the rules, an older one, or
    none) is scheduled best-effort by a daemon whose config restricts the class; the open default grants it."""
    job_id = hostile.sbatch("--account=plain", "--comment", "slurmplan:class=guaranteed;gpus=1")
    snap = SlurmBackend(env={"SLURM_CONF": hostile.site.env["SLURM_CONF"]}).snapshot()
    (job,) = [j for j in snap.jobs if j.job_id == job_id]
    assert job.account == "plain"
    config = config_from_mapping(TRUST)
    observed = classify(job, (), config.trust)
    assert observed.managed and observed.hints.job_class is JobClass.BEST_EFFORT
    assert classify(job, ()).hints.job_class is JobClass.GUARANTEED  # the open default would have granted it
    hostile.write_config(**TRUST)
    try:  # the daemon, acting, tells the user in the admin comment (and explain) which hint it ignored and why
        comment = hostile.ticks_until(job_id, ("RUNNING",))["admin_comment"]
        explained = hostile.slurmplan("explain", str(job_id), "--config", str(hostile.config))
    finally:
        hostile.write_config()
        hostile.cancel(job_id)
    assert comment.endswith(f"| ignored hints: class guaranteed (not allowed for account plain / QOS (none);"
                            f" slurmplan explain {job_id})"), comment  # fmt: skip
    assert "a100x1 dp1" in comment  # the decision itself is the one the open rules give a best-effort job
    out = explained.stdout
    assert "scheduled without some of its hints" in out and "guaranteed_accounts [gold]" in out, out


def test_a_hint_with_control_characters_reaches_the_log_escaped(hostile) -> None:
    log = Path(hostile.site.env["SLURM_CONF"]).parent.parent / "log" / "slurmctld.log"
    refused = hostile.as_user("sbatch", "-o", "/dev/null", "--comment", "slurmplan:model=x\nFORGED-LINE\x1b[2J",
                              "--wrap", "true")  # fmt: skip
    assert refused.returncode != 0
    time.sleep(0.5)
    text = log.read_text(errors="replace")
    assert "FORGED-LINE" in text  # it was logged ...
    assert not any(line.startswith("FORGED-LINE") for line in text.splitlines())  # ... on slurmplan's own line
    assert "\x1b[2J" not in text
