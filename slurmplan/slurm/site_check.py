"""``slurmplan site check``: what in the controller's configuration would make slurmplan work badly, with fixes.

It only reads: ``scontrol show config`` (the running controller's view, so a slurm.conf edited but not yet
reconfigured shows as it really is), ``sinfo --json`` for the nodes, the files those name (job_submit.lua,
plugstack.conf and its includes, the controller prolog/epilog), and ``sacctmgr`` for the daemon user's admin
level when accounting is on. Each finding says what is wrong, why it matters for slurmplan, and the fix.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from slurmplan.domain import Node
from slurmplan.slurm.reader import read_show_config
from slurmplan.slurm.run import SlurmCommandError, run_slurm

QUICK_RESTART_CRED_EXPIRE_S = 30
"""A requeued job waits ``cred_expire`` seconds (its begin time) before it can start again: a move costs that."""
DEFAULT_CRED_EXPIRE_S = 120


@dataclass(frozen=True)
class Finding:
    check: str
    ok: bool
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cred_expire(conf: Mapping[str, str]) -> int:
    match = re.search(r"cred_expire=(\d+)", conf.get("AuthInfo", ""))
    return int(match.group(1)) if match else DEFAULT_CRED_EXPIRE_S


def check_gpu_features(nodes: list[Node]) -> Finding:
    missing = [n.name for n in nodes if n.gpu_type and n.gpu_type not in {f.lower() for f in n.features}]
    if missing:
        return Finding(
            "gpu-type-features",
            False,
            f"nodes without their GPU type as a feature: {', '.join(sorted(missing))}",
            "add the type to each node's Features= in slurm.conf (e.g. NodeName=a100n1 Features=a100 Gres=gpu:a100:4), "
            "so an untyped GPU job can be steered with --constraint",
        )
    return Finding("gpu-type-features", True, f"{len(nodes)} nodes list their GPU type as a feature")


def check_cred_expire(conf: Mapping[str, str]) -> Finding:
    value = _cred_expire(conf)
    if value > QUICK_RESTART_CRED_EXPIRE_S:
        return Finding(
            "cred-expire",
            False,
            f"cred_expire is {value} s: every requeued (moved) job waits that long before it can start again",
            f"set AuthInfo=...,cred_expire={QUICK_RESTART_CRED_EXPIRE_S} (or less) in slurm.conf and restart slurmctld",
        )
    return Finding("cred-expire", True, f"cred_expire is {value} s")


def check_job_submit(conf: Mapping[str, str]) -> Finding:
    plugins = conf.get("JobSubmitPlugins", "")
    if "lua" not in plugins:
        return Finding(
            "job-submit-lua",
            False,
            f"JobSubmitPlugins is {plugins or '(null)'}: hints are not checked and managed jobs are not held",
            "set JobSubmitPlugins=lua in slurm.conf and install job_submit.lua (`slurmplan site install`)",
        )
    lua = Path(conf.get("SLURM_CONF", "/etc/slurm/slurm.conf")).parent / "job_submit.lua"
    if not lua.is_file() or "slurmplan_hints" not in lua.read_text(errors="replace"):
        return Finding(
            "job-submit-lua", False, f"{lua} is not slurmplan's", "run `slurmplan site install`, then reconfigure"
        )
    return Finding("job-submit-lua", True, f"JobSubmitPlugins={plugins}, {lua} is slurmplan's")


def _plugstack_lines(path: Path, depth: int = 0) -> list[str]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and words[0] == "include" and depth < 4:
            for inc in sorted(glob.glob(words[1])):
                out += _plugstack_lines(Path(inc), depth + 1)
        elif words:
            out.append(" ".join(words))
    return out


def check_spank(conf: Mapping[str, str]) -> Finding:
    plugstack = Path(
        conf.get("PlugStackConfig") or Path(conf.get("SLURM_CONF", "/etc/slurm/slurm.conf")).parent / "plugstack.conf"
    )
    lines = [ln for ln in _plugstack_lines(plugstack) if "slurmplan_spank" in ln]
    if not lines:
        return Finding(
            "spank-plugin",
            False,
            f"{plugstack} does not load slurmplan_spank.so: no --plan-* options, no SLURMPLAN_* plan in jobs",
            "run `slurmplan site install` (adds `include plugstack.conf.d/*.conf`), or add "
            "`optional /usr/lib/x86_64-linux-gnu/slurm-wlm/slurmplan_spank.so` to plugstack.conf",
        )
    missing = [ln.split()[1] for ln in lines if len(ln.split()) > 1 and not Path(ln.split()[1]).is_file()]
    if missing:
        return Finding(
            "spank-plugin", False, f"plugstack.conf names missing files: {', '.join(missing)}", "make -C spank install"
        )
    return Finding("spank-plugin", True, f"loaded from {plugstack}")


def check_requeue(conf: Mapping[str, str]) -> Finding:
    if conf.get("JobRequeue", "1") != "1":
        return Finding(
            "job-requeue",
            False,
            "JobRequeue is 0: batch jobs are not requeueable by default, so the daemon cannot move them",
            "set JobRequeue=1 in slurm.conf (users may still opt out with --no-requeue)",
        )
    return Finding("job-requeue", True, "JobRequeue=1")


def check_admin_comment(conf: Mapping[str, str], user: str, env: Mapping[str, str] | None) -> Finding:
    slurm_user = conf.get("SlurmUser", "root").split("(")[0]
    if user in ("root", slurm_user):
        return Finding("admin-comment", True, f"the daemon's user {user} may set AdminComment")
    level = ""
    if conf.get("AccountingStorageType", "") not in ("", "(null)", "accounting_storage/none"):
        try:
            proc = run_slurm(["sacctmgr", "-n", "-P", "show", "user", user, "format=adminlevel"], env, check=False)
            level = proc.stdout.strip()
        except SlurmCommandError:
            level = ""
    if level == "Administrator":
        return Finding("admin-comment", True, f"the daemon's user {user} is a Slurm {level}")
    if level == "Operator":  # checked on 22.05: AdminComment needs validate_super_user (Administrator)
        return Finding(
            "admin-comment",
            False,
            f"the daemon's user {user} is a Slurm Operator: it may hold, update, release, signal and requeue jobs, "
            "but Slurm lets only an Administrator change AdminComment, where the daemon writes its decisions",
            f"sacctmgr modify user {user} set adminlevel=Administrator, or run the daemon as root",
        )
    return Finding(
        "admin-comment",
        False,
        f"the daemon's user {user} is neither root, SlurmUser ({slurm_user}) nor a Slurm operator: it cannot write "
        "decisions into AdminComment, hold or release other users' jobs",
        f"sacctmgr modify user {user} set adminlevel=Operator (needs accounting), or run the daemon as root",
    )


def check_prolog_epilog(conf: Mapping[str, str]) -> Finding:
    missing = []
    for key in ("PrologSlurmctld", "EpilogSlurmctld"):
        path = conf.get(key, "(null)")
        text = Path(path).read_text(errors="replace") if path not in ("", "(null)") and Path(path).is_file() else ""
        if "slurmplan" not in text:
            missing.append(f"{key}={path}")
    if missing:
        return Finding(
            "prolog-epilog",
            False,
            f"slurmplan's controller hooks are not configured ({'; '.join(missing)}): job starts and ends are not "
            "journaled",
            "`slurmplan site install` writes prolog_slurmctld.sh/epilog_slurmctld.sh and slurmplan.conf, which sets "
            "PrologSlurmctld= and EpilogSlurmctld=; then `scontrol reconfigure`",
        )
    return Finding("prolog-epilog", True, "PrologSlurmctld and EpilogSlurmctld run slurmplan's hooks")


def check_managed_partitions(nodes: list[Node], managed: tuple[str, ...]) -> list[Finding]:
    out = []
    for part in managed:
        members = [n for n in nodes if part in n.partitions]
        gpus = sum(n.gpus for n in members)
        if not members:
            out.append(Finding(f"partition:{part}", False, f"managed partition {part} does not exist or has no nodes",
                               "fix managed_partitions in slurmplan.yaml"))  # fmt: skip
        elif gpus == 0:
            out.append(Finding(f"partition:{part}", False, f"managed partition {part} has no GPUs",
                               "remove it from managed_partitions, or add GPU nodes to it"))  # fmt: skip
        else:
            out.append(
                Finding(f"partition:{part}", True, f"managed partition {part}: {len(members)} nodes, {gpus} GPUs")
            )
    return out


def site_check(
    managed_partitions: tuple[str, ...] = (), daemon_user: str | None = None, env: Mapping[str, str] | None = None
) -> list[Finding]:
    """Every check against the running controller; raises ``SlurmCommandError`` when it cannot be read."""
    from slurmplan.slurm.backend import SlurmBackend

    conf = read_show_config(env)
    nodes = list(SlurmBackend(env=env).snapshot().cluster.nodes)
    user = daemon_user or pwd.getpwuid(os.geteuid()).pw_name
    return [
        check_gpu_features(nodes),
        check_cred_expire(conf),
        check_job_submit(conf),
        check_spank(conf),
        check_requeue(conf),
        check_admin_comment(conf, user, env),
        check_prolog_epilog(conf),
        *check_managed_partitions(nodes, managed_partitions),
    ]


def format_findings(findings: list[Finding]) -> str:
    lines = []
    for f in findings:
        lines.append(f"{'ok     ' if f.ok else 'PROBLEM'} {f.check}: {f.detail}")
        if not f.ok:
            lines.append(f"        fix: {f.fix}")
    bad = sum(1 for f in findings if not f.ok)
    lines.append(f"{bad} problem{'s' if bad != 1 else ''} found" if bad else "no problems found")
    return "\n".join(lines)
