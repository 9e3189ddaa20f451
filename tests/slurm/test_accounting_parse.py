"""slurmctld's association and QOS records as the daemon reads them, and the limits and weights drawn from
them (recorded ``scontrol show assoc_mgr flags=assoc,qos`` output of Slurm 22.05, trimmed)."""

from __future__ import annotations

from slurmplan.control.site_accounting import ClassRules, cap_hints
from slurmplan.domain import Hints, Job, JobClass, JobState
from slurmplan.slurm.accounting import parse_assoc_mgr

_GRP = "GrpTRES=cpu=N(0),mem=N(0),gres/gpu={grp},gres/gpu:a100=N(0)"
TEXT = "\n".join(
    [
        "Current Association Manager state",
        "",
        "Association Records",
        "",
        "ClusterName=dev1 Account=root UserName= Partition= Priority=0 ID=1",
        "    SharesRaw/Norm/Level/Factor=1/0.00/1/0.00",
        "    UsageRaw/Norm/Efctv=100.00/1.00/1.00",
        "    ParentAccount= Lft=1 DefAssoc=No",
        "    " + _GRP.format(grp="N(0)"),
        "    MaxJobs= MaxJobsAccrue= MaxSubmitJobs= MaxWallPJ=",
        "    MaxTRESPJ=",
        "ClusterName=dev1 Account=alpha UserName= Partition= Priority=0 ID=3",
        "    SharesRaw/Norm/Level/Factor=50/0.50/102/0.00",
        "    UsageRaw/Norm/Efctv=80.00/0.80/0.80",
        "    ParentAccount=root(1) Lft=10 DefAssoc=No",
        "    " + _GRP.format(grp="6(4)"),
        "    MaxJobs=3(1) MaxJobsAccrue= MaxSubmitJobs= MaxWallPJ=",
        "    MaxTRESPJ=",
        "ClusterName=dev1 Account=alpha UserName=t1(999) Partition= Priority=0 ID=6",
        "    SharesRaw/Norm/Level/Factor=1/0.50/2/0.40",
        "    UsageRaw/Norm/Efctv=80.00/0.80/0.80",
        "    ParentAccount= Lft=13 DefAssoc=Yes",
        "    " + _GRP.format(grp="N(0)"),
        "    MaxTRESPJ=gres/gpu=2",
        "    MaxJobs=1(1) MaxJobsAccrue= MaxSubmitJobs= MaxWallPJ=",
        "ClusterName=dev1 Account=beta UserName= Partition= Priority=0 ID=4",
        "    SharesRaw/Norm/Level/Factor=50/0.50/102/0.00",
        "    UsageRaw/Norm/Efctv=20.00/0.20/0.20",
        "    ParentAccount=root(1) Lft=4 DefAssoc=No",
        "    garbage line without equals",
        "ClusterName=dev1 Account=broken UserName= Partition= Priority=0 ID=9",
        "    SharesRaw/Norm/Level/Factor=x/y/z/w",
        "    MaxTRESPJ=gres/gpu=notanumber",
        "",
        "QOS Records",
        "",
        "QOS=gpu2(3)",
        "    UsageRaw=0.000000",
        "    " + _GRP.format(grp="N(0)"),
        "    MaxTRESPJ=gres/gpu=2",
        "    PreemptMode=OFF",
        "    Priority=0",
        "    Account Limits",
        "      alpha",
        "        MaxTRESPA=gres/gpu=N(0)",
        "QOS=high(2)",
        "    MaxTRESPJ=",
        "    PreemptMode=REQUEUE",
        "    Priority=1000",
    ]
)


def test_records_limits_and_usage_are_read_and_a_bad_record_is_skipped():
    view = parse_assoc_mgr(TEXT)
    assert [(a.account, a.user) for a in view.associations] == [
        ("root", ""), ("alpha", ""), ("alpha", "t1"), ("beta", ""),
    ]  # fmt: skip
    alpha = view.associations[1]
    assert (alpha.parent, alpha.grp_gpus, alpha.grp_gpus_used, alpha.max_jobs, alpha.jobs_running) == (
        "root", 6, 4, 3, 1,
    )  # fmt: skip
    assert view.user_row("t1", "alpha").max_gpus_per_job == 2
    assert view.qos["high"].priority == 1000 and view.qos["high"].preempt_mode == "REQUEUE"
    assert view.qos["gpu2"].max_gpus_per_job == 2


def test_gpu_cap_is_the_tightest_limit_and_says_which():
    view = parse_assoc_mgr(TEXT)
    pending = Job(1, user="t1", account="alpha")
    assert view.gpu_cap(pending, "normal") == (2, "MaxTRESPerJob gres/gpu=2 of t1@alpha")
    other = Job(2, user="t2", account="alpha")
    assert view.gpu_cap(other, "") == (2, "GrpTRES gres/gpu=6 of account alpha (4 in use)")
    running = Job(3, user="t2", account="alpha", state=JobState.RUNNING, gpus_per_node=4)
    assert view.gpu_cap(running, "")[0] == 6, "a running job's own GPUs count as its own"
    assert view.gpu_cap(Job(4, user="t2", account="beta"), "gpu2") == (2, "MaxTRESPerJob gres/gpu=2 of QOS gpu2")
    assert view.gpu_cap(Job(5, user="t2", account="beta"), "") == (None, "")


def test_account_that_used_more_has_the_smaller_weight():
    factors = parse_assoc_mgr(TEXT).account_factors()
    assert set(factors) == {"alpha", "beta"}
    assert factors["alpha"].factor == 2 ** (-0.8 / 0.5) and factors["beta"].factor == 2 ** (-0.2 / 0.5)
    assert factors["alpha"].weight < factors["beta"].weight
    assert "alpha: shares 0.500 x fairshare 2^(-0.800/0.500)" in factors["alpha"].describe()


def test_cap_hints_and_class_rules():
    hints = Hints(model="gpt2", gpus=4, min_gpus=2, max_gpus=8)
    assert cap_hints(hints, 3) == Hints(model="gpt2", gpus=3, min_gpus=2, max_gpus=3)
    assert cap_hints(hints, 0).max_gpus == 1
    assert cap_hints(hints, 8) is hints
    claims = Hints(job_class=JobClass.GUARANTEED)
    assert ClassRules().job_class(claims, "a", "normal") is JobClass.GUARANTEED  # no lists: the hint counts
    rules = ClassRules(guaranteed_qos=("high",))
    assert rules.job_class(claims, "a", "normal") is JobClass.BEST_EFFORT
    assert rules.job_class(Hints(), "a", "high") is JobClass.GUARANTEED


def test_max_jobs_reached_only_for_a_pending_job_at_its_limit():
    view = parse_assoc_mgr(TEXT)
    assert view.max_jobs_reached(Job(1, user="t1", account="alpha")) == "MaxJobs=1 of t1@alpha reached (1 running)"
    assert view.max_jobs_reached(Job(1, user="t1", account="alpha", state=JobState.RUNNING)) == ""
    assert view.max_jobs_reached(Job(1, user="t2", account="alpha")) == ""


def test_preempt_lists_from_sacctmgr():
    from slurmplan.slurm.accounting import parse_preempt_lists

    text = "normal|\nhigh|normal,gpu2\n|junk\ngpu2|\n"
    assert parse_preempt_lists(text) == {"normal": (), "high": ("normal", "gpu2"), "gpu2": ()}
