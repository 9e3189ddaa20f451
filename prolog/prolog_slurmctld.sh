#!/bin/sh
# PrologSlurmctld for slurmplan: journal the job's start (slurm.conf: PrologSlurmctld=<this file>).
#
# slurmctld runs this on the controller when a job starts, with SLURM_JOB_* in the environment and almost
# nothing else (no PATH worth the name), so the command and its config come from slurmplan-hook.env beside
# this script (written by `slurmplan site install`). It never fails the job: a non-zero exit would make Slurm
# requeue or hold it, so whatever happens it exits 0; errors go to the hook log.
here=$(dirname "$0")
[ -r "$here/slurmplan-hook.env" ] && . "$here/slurmplan-hook.env"
: "${SLURMPLAN_CMD:=slurmplan}"
: "${SLURMPLAN_HOOK_LOG:=/var/log/slurmplan/hook.log}"
export PATH="${PATH:-/usr/bin:/bin}:/usr/local/bin:/usr/bin:/bin"
mkdir -p "$(dirname "$SLURMPLAN_HOOK_LOG")" 2>/dev/null
# shellcheck disable=SC2086  # SLURMPLAN_CMD may be "python3 -m slurmplan"
timeout 20 $SLURMPLAN_CMD hook job-start ${SLURMPLAN_CONFIG:+--config "$SLURMPLAN_CONFIG"} \
    ${SLURMPLAN_DATABASE:+--database "$SLURMPLAN_DATABASE"} \
    >>"$SLURMPLAN_HOOK_LOG" 2>&1 </dev/null || true
exit 0
