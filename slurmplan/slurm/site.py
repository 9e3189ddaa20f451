"""Putting slurmplan's Slurm-side files in place on a controller: ``slurmplan site install``.

The files live in the source tree (``site/``, ``prolog/``, ``spank/``) with ``@NAME@`` placeholders for the
paths that differ between sites. Installing renders them and writes each one only when its content changes,
keeping a timestamped backup of what it replaces, so running it twice changes nothing the second time and an
admin can always see (``--dry-run``) and undo what it did. Two existing files are edited, never replaced
wholesale: slurm.conf gets one ``include`` line and plugstack.conf one ``include`` of its ``.d`` directory.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from slurmplan.domain import ValidationError

log = logging.getLogger(__name__)

DEFAULT_PLUGIN_DIR = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm")
DEFAULT_CONFIG = Path("/etc/slurmplan/slurmplan.yaml")
BACKUP_SUFFIX = ".slurmplan-bak."


def source_root() -> Path:
    """The checkout this package runs from (it holds ``site/job_submit.lua``)."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "site" / "job_submit.lua").is_file():
            return parent
    raise ValidationError("source", str(Path(__file__).parent), "a slurmplan checkout with site/job_submit.lua", "site")


def default_command() -> str:
    """How Slurm's scripts and systemd start slurmplan: this interpreter, so a virtualenv keeps working."""
    return f"{shlex.quote(sys.executable)} -m slurmplan.cli"


@dataclass(frozen=True)
class SiteLayout:
    """Where things go on the controller. All absolute paths are taken below ``prefix``."""

    prefix: Path = Path("/")
    slurm_conf_dir: Path = Path("/etc/slurm")
    plugin_dir: Path = DEFAULT_PLUGIN_DIR
    systemd_dir: Path = Path("/etc/systemd/system")
    cron_dir: Path = Path("/etc/cron.d")
    config: Path = DEFAULT_CONFIG
    command: str = ""
    database: Path | None = None
    """Only for the hook's environment file; normally the database comes from the config."""
    hook_log: Path = Path("/var/log/slurmplan/hook.log")
    managed_partitions: tuple[str, ...] = ()
    """Partitions whose jobs job_submit.lua holds even without hints (the config's ``managed_partitions``)."""
    service_user: str = "slurmplan"
    """The dedicated user the daemon and watchdog units run as (``site install`` creates it when missing)."""
    heartbeat_file: Path | None = None
    """The daemon's heartbeat; job_submit.lua stops holding jobs when it is stale (fail-open)."""

    def at(self, path: Path) -> Path:
        """``path`` below the prefix (``/etc/slurm`` -> ``<prefix>/etc/slurm``)."""
        return self.prefix / path.relative_to(path.anchor) if path.is_absolute() else self.prefix / path

    def placeholders(self) -> dict[str, str]:
        return {
            "@SLURM_CONF_DIR@": str(self.slurm_conf_dir),
            "@PLUGIN_DIR@": str(self.plugin_dir),
            "@CONFIG@": str(self.config),
            "@SLURMPLAN_CMD@": self.command or default_command(),
            "@SERVICE_USER@": self.service_user,
        }


@dataclass(frozen=True)
class InstallItem:
    """One file to put in place: where (the real path, before the prefix), what, and with which mode."""

    dest: Path
    content: bytes
    mode: int = 0o644
    source: str = ""


@dataclass(frozen=True)
class InstallResult:
    dest: Path
    status: str
    """``created``, ``updated`` (the old file was backed up), ``unchanged`` or ``skipped``."""
    backup: Path | None = None
    note: str = ""


def render(text: str, layout: SiteLayout) -> str:
    for key, value in layout.placeholders().items():
        text = text.replace(key, value)
    return text


_PARTITIONS_LINE = "H.MANAGED_PARTITIONS = {}"


_MODELS_LINE = "H.KNOWN_MODELS = {}"
_TYPES_LINE = "H.KNOWN_TYPES = {}"


def known_names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The model names and GPU types the performance catalogs price (names and aliases, normalised), which
    job_submit.lua then accepts in hints; everything else is refused at submission."""
    from slurmplan.perf.hardware import default_catalog
    from slurmplan.perf.models import _catalog

    models, aliases = _catalog(os.environ.get("SLURMPLAN_MODEL_CATALOG") or None)
    catalog = default_catalog()
    return tuple(sorted({*models, *aliases})), tuple(sorted({*catalog.names(), *catalog.aliases}))


def _lua_list(field: str, names: tuple[str, ...], allowed: str, ok: str) -> str:
    for name in names:
        if not name or not all(c.isascii() and (c.isalnum() or c in ok) for c in name):
            raise ValidationError(field, name, allowed, "site")
    return "{" + ", ".join(f'"{name}"' for name in names) + "}"


def render_job_submit(
    text: str, partitions: tuple[str, ...], models: tuple[str, ...] = (), types: tuple[str, ...] = ()
) -> str:
    """job_submit.lua with its managed-partition list and its known models and GPU types filled in (names are
    checked, they become lua strings; an empty list makes job_submit.lua check nothing)."""
    filled = {
        _PARTITIONS_LINE: _lua_list("managed_partitions", partitions, "partition names of A-Z a-z 0-9 _ - .", "_-."),
        _MODELS_LINE: _lua_list("model", models, "model names of A-Z a-z 0-9 . _ / -", "._/-"),
        _TYPES_LINE: _lua_list("gpu type", types, "types of a-z 0-9 _ -", "_-"),
    }
    for line, listed in filled.items():
        if line not in text:
            raise ValidationError("job_submit.lua", "", f"a line {line!r}", "site")
        text = text.replace(line, line.removesuffix("{}") + listed, 1)
    return text


_HEARTBEAT_LINE = "H.HEARTBEAT_FILE = nil"


def render_heartbeat(text: str, path: Path | None) -> str:
    """job_submit.lua reading the daemon's heartbeat at ``path`` (None: leave it holding unconditionally)."""
    if path is None:
        return text
    if _HEARTBEAT_LINE not in text:
        raise ValidationError("job_submit.lua", "", f"a line {_HEARTBEAT_LINE!r}", "site")
    if '"' in str(path) or "\\" in str(path) or "\n" in str(path):
        raise ValidationError("heartbeat_file", str(path), "a path without quotes, backslashes or newlines", "site")
    return text.replace(_HEARTBEAT_LINE, f'H.HEARTBEAT_FILE = "{path}"', 1)


_DAEMON_UID_LINE = "H.DAEMON_UID = nil"


def render_daemon_uid(text: str, user: str) -> str:
    """job_submit.lua letting the daemon's service user (when it exists and is not root) release held jobs."""
    import pwd

    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        return text  # created later by install_service; the next `site install` fills it in
    return text.replace(_DAEMON_UID_LINE, f"H.DAEMON_UID = {uid}", 1) if uid else text


def hook_env(layout: SiteLayout) -> str:
    """``slurmplan-hook.env``: sourced by the prolog/epilog scripts, whose environment slurmctld empties."""
    lines = [
        "# written by `slurmplan site install`; sourced by prolog_slurmctld.sh and epilog_slurmctld.sh",
        f"SLURMPLAN_CMD={shlex.quote(layout.command or default_command())}",
        f"SLURMPLAN_CONFIG={shlex.quote(str(layout.config))}",
        f"SLURMPLAN_HOOK_LOG={shlex.quote(str(layout.hook_log))}",
    ]
    if layout.database is not None:
        lines.append(f"SLURMPLAN_DATABASE={shlex.quote(str(layout.database))}")
    return "\n".join(lines) + "\n"


def build_plugin(root: Path) -> Path | None:
    """``make -C spank``; None (and a warning) when it cannot be built here, e.g. no compiler."""
    so = root / "spank" / "slurmplan_spank.so"
    try:
        subprocess.run(["make", "-C", str(root / "spank")], check=True, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not build the SPANK plugin (%s); install it later with `make -C spank install`", exc)
    return so if so.is_file() else None


def site_files(layout: SiteLayout, root: Path | None = None, plugin: Path | None = None) -> list[InstallItem]:
    """Every file ``site install`` writes, rendered for ``layout`` (the two edits are in ``conf_edits``)."""
    root = root or source_root()
    conf = layout.slurm_conf_dir

    def text(rel: str) -> bytes:
        return render((root / rel).read_text(), layout).encode()

    rendered = [
        (conf / "slurmplan.conf", "site/slurm.conf.snippet", 0o644),
        (conf / "plugstack.conf.d/slurmplan.conf", "site/plugstack.conf", 0o644),
        (conf / "slurmplan/gres.conf.example", "site/gres.conf.example", 0o644),
        (conf / "slurmplan/prolog_slurmctld.sh", "prolog/prolog_slurmctld.sh", 0o755),
        (conf / "slurmplan/epilog_slurmctld.sh", "prolog/epilog_slurmctld.sh", 0o755),
        (layout.cron_dir / "slurmplan", "site/slurmplan.cron", 0o644),
    ]
    lua = render_job_submit((root / "site/job_submit.lua").read_text(), layout.managed_partitions, *known_names())
    lua = render_daemon_uid(render_heartbeat(lua, layout.heartbeat_file), layout.service_user)
    items = [InstallItem(conf / "job_submit.lua", lua.encode(), 0o644, "site/job_submit.lua")]
    items += [InstallItem(dest, text(rel), mode, rel) for dest, rel, mode in rendered]
    items.append(InstallItem(conf / "slurmplan/slurmplan-hook.env", hook_env(layout).encode(), 0o644, "generated"))
    for unit in sorted((root / "site" / "systemd").iterdir()):
        items.append(InstallItem(layout.systemd_dir / unit.name, text(f"site/systemd/{unit.name}"), 0o644, "systemd"))
    if plugin is not None:
        items.append(InstallItem(layout.plugin_dir / plugin.name, plugin.read_bytes(), 0o755, "spank/"))
    return items


def _with_line(path: Path, line: str) -> bytes | None:
    """The file's content with ``line`` appended when missing; None when the file does not exist."""
    if not path.is_file():
        return None
    old = path.read_text()
    if any(existing.strip() == line for existing in old.splitlines()):
        return old.encode()
    sep = "" if old.endswith("\n") or not old else "\n"
    return (old + sep + f"# added by slurmplan site install\n{line}\n").encode()


def conf_edits(layout: SiteLayout) -> tuple[list[InstallItem], list[InstallResult]]:
    """The ``include`` lines for slurm.conf and plugstack.conf; files that do not exist are skipped."""
    conf = layout.slurm_conf_dir
    wanted = [
        (conf / "slurm.conf", f"include {conf / 'slurmplan.conf'}"),
        (conf / "plugstack.conf", f"include {conf / 'plugstack.conf.d'}/*.conf"),
    ]
    items, skipped = [], []
    for dest, line in wanted:
        content = _with_line(layout.at(dest), line)
        if content is None:
            skipped.append(InstallResult(dest, "skipped", note=f"no such file; add `{line}` yourself"))
        else:
            items.append(InstallItem(dest, content, layout.at(dest).stat().st_mode & 0o777, "edit"))
    return items, skipped


def install(items: list[InstallItem], layout: SiteLayout, *, dry_run: bool = False) -> list[InstallResult]:
    """Write each item whose content differs, backing up the old file; ``dry_run`` only reports."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results = []
    for item in items:
        target = layout.at(item.dest)
        old = target.read_bytes() if target.is_file() else None
        if old == item.content:
            if not dry_run and (target.stat().st_mode & 0o777) != item.mode:
                os.chmod(target, item.mode)
            results.append(InstallResult(item.dest, "unchanged"))
            continue
        backup = target.with_name(target.name + BACKUP_SUFFIX + stamp) if old is not None else None
        results.append(InstallResult(item.dest, "updated" if old is not None else "created", backup))
        if dry_run:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if backup is not None:
            shutil.copy2(target, backup)
        tmp = target.with_name(f".{target.name}.slurmplan-tmp")
        tmp.write_bytes(item.content)
        os.chmod(tmp, item.mode)
        os.replace(tmp, target)
        log.info("%s %s", results[-1].status, target)
    return results


def install_site(layout: SiteLayout, *, dry_run: bool = False, build: bool = True) -> list[InstallResult]:
    """The whole ``slurmplan site install``: render, build the plugin, write files, then the include lines."""
    root = source_root()
    plugin = build_plugin(root) if build else None
    if plugin is None and (root / "spank" / "slurmplan_spank.so").is_file():
        plugin = root / "spank" / "slurmplan_spank.so"
    layout = replace(layout, command=layout.command or default_command())
    results = install(site_files(layout, root, plugin), layout, dry_run=dry_run)
    if plugin is None:
        results.append(InstallResult(layout.plugin_dir / "slurmplan_spank.so", "skipped", note="plugin not built"))
    edits, skipped = conf_edits(layout)
    return results + install(edits, layout, dry_run=dry_run) + skipped


# ------------------------------------------------------------------------------------------------- plan-env


def job_admin_comment(job_id: int) -> str:
    """The job's admin comment from ``squeue --json`` (what a job script can read on a cluster without the plugin)."""
    import json

    from slurmplan.slurm.reader import find_job, read_jobs
    from slurmplan.slurm.run import run_slurm

    data = json.loads(run_slurm(["squeue", "--json", "--states=all", "-j", str(job_id)]).stdout)
    record = find_job(read_jobs(data, skip_bad=True), job_id)
    if record is not None:
        return record.admin_comment
    raise ValidationError("job_id", job_id, "a job squeue knows", "plan-env")


def plan_env_for_job(job_id: int, admin_comment: str | None = None) -> dict[str, str]:
    """The ``SLURMPLAN_*`` variables the SPANK plugin would export, from the decision in the admin comment."""
    from slurmplan.formats import parse_decision, plan_environment

    decision = parse_decision(job_admin_comment(job_id) if admin_comment is None else admin_comment)
    if decision is None:
        return {}
    return {**plan_environment(*decision), "SLURMPLAN_PLAN_SOURCE": "admin-comment"}


# ------------------------------------------------------------------------------- the site on a dev cluster


@dataclass(frozen=True)
class DevSite:
    """Where a dev cluster started with ``--site`` keeps the site's files (all under its state directory)."""

    dir: Path
    journal: Path
    plan_dir: Path
    hook_log: Path


def dev_site_overrides(
    state_dir: Path,
    conf_dir: Path,
    *,
    managed_partitions: tuple[str, ...] = (),
    journal: Path | None = None,
    command: str | None = None,
    root: Path | None = None,
    plugin: Path | None = None,
    config: Path | None = None,
) -> tuple[dict[str, Any], DevSite]:
    """Layout overrides that configure a dev cluster's controller as ``site install`` configures a real one:
    the SPANK plugin loaded (``required``) from plugstack.conf, ``JobSubmitPlugins=lua`` with job_submit.lua
    (managed partitions, known models and types filled in), PrologSlurmctld/EpilogSlurmctld running prolog/
    with a hook environment whose journal is ``journal`` (default: ``<state_dir>/site/journal.db``).

    Writes the generated files under ``<state_dir>/site``; the dev cluster copies them beside its slurm.conf
    (``conf_dir``). ``plugin`` is the built ``slurmplan_spank.so`` (see :func:`build_plugin`); without one the
    cluster runs without plan options, and that is said in the plugstack file.
    """
    root = root or source_root()
    site_dir = state_dir / "site"
    site_dir.mkdir(parents=True, exist_ok=True)
    dev = DevSite(site_dir, journal or site_dir / "journal.db", site_dir / "plans", site_dir / "hook.log")
    dev.plan_dir.mkdir(exist_ok=True)
    plugstack = site_dir / "plugstack.conf"
    if plugin is not None:
        plugstack.write_text(f"required {plugin} plan_dir={dev.plan_dir}\n")
    else:
        plugstack.write_text("# slurmplan_spank.so could not be built here (make -C spank): no plan options\n")
    env_file = site_dir / "slurmplan-hook.env"
    layout = SiteLayout(command=command or default_command(), database=dev.journal, hook_log=dev.hook_log)
    if config is not None:  # the daemon config `devcluster up` writes (``devconfig.py``), not /etc's
        layout = replace(layout, config=config)
    env_file.write_text(hook_env(layout))
    lua = site_dir / "job_submit.lua"
    lua.write_text(render_job_submit((root / "site/job_submit.lua").read_text(), managed_partitions, *known_names()))
    overrides = {
        "slurm_conf_extra": [
            "JobSubmitPlugins=lua",
            f"PrologSlurmctld={conf_dir / 'prolog_slurmctld.sh'}",
            f"EpilogSlurmctld={conf_dir / 'epilog_slurmctld.sh'}",
        ],
        "conf_files": {
            "job_submit.lua": str(lua),
            "plugstack.conf": str(plugstack),
            "prolog_slurmctld.sh": str(root / "prolog/prolog_slurmctld.sh"),
            "epilog_slurmctld.sh": str(root / "prolog/epilog_slurmctld.sh"),
            "slurmplan-hook.env": str(env_file),
        },
    }
    return overrides, dev
