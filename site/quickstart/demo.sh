#!/usr/bin/env bash
# Quick start (a): on a fresh Debian 12 (Slurm 22.05) or Debian 13 (Slurm 24.11) machine, as root.
# Installs Slurm, munge and slurmplan, starts a local Slurm cluster of virtual GPU nodes (2 x 4 A100,
# 2 x 4 V100, 2 x 2 T4 on this one host), submits a small mixed workload and shows what slurmplan sees, then
# submits managed jobs and runs the slurmplan daemon for a few short rounds, printing its decisions.
# The cluster keeps running afterwards; stop it with `slurmplan devcluster down`.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

if [ "$(id -u)" -ne 0 ]; then
    echo "demo.sh: run as root (the local cluster runs Slurm's daemons)" >&2
    exit 1
fi

install_all() { # steps 1-2; SLURMPLAN_DEMO_SKIP_INSTALL=1 skips them (e.g. in the Debian 13 root of debian13.sh)
    . site/quickstart/packages.sh
    echo "== 1. install Slurm, slurmdbd, MariaDB, munge and Python (Debian packages)"
    apt_install $SLURM_PACKAGES $PYTHON_PACKAGES

    echo "== 2. install slurmplan"
    pip_install -e "$REPO"
}
if [ "${SLURMPLAN_DEMO_SKIP_INSTALL:-}" = 1 ]; then
    echo "== 1-2. install skipped (SLURMPLAN_DEMO_SKIP_INSTALL=1)"
else
    install_all
fi

echo "== 3. start the local development cluster"
export SLURMPLAN_DEVCLUSTER_DIR=${SLURMPLAN_DEVCLUSTER_DIR:-$REPO/.state/devcluster}
ACCOUNTING=1
if ! slurmplan devcluster up --accounting; then # MariaDB + slurmdbd in the state directory: fairshare, QOS, limits
    echo "demo.sh: accounting did not start (above); the demo goes on without it" >&2
    slurmplan devcluster down >/dev/null 2>&1 || true
    slurmplan devcluster up --no-accounting
    ACCOUNTING=0
fi
export SLURM_CONF=$SLURMPLAN_DEVCLUSTER_DIR/conf/slurm.conf

echo "== 4. submit a small mixed workload"
JOBS=$SLURMPLAN_DEVCLUSTER_DIR/jobs
mkdir -p "$JOBS"
submit() { # name, sbatch options...
    local name=$1
    shift
    sbatch --parsable -J "$name" --chdir="$JOBS" --time=30 "$@" --wrap 'sleep 600'
}
submit bert-a100x4 --gres=gpu:a100:4
submit gpt-a100x8 --gres=gpu:a100:4 --nodes=2 # does not fit next to bert: waits
submit resnet-v100x2 --gres=gpu:v100:2
submit llama-v100x8 --gres=gpu:v100:4 --nodes=2 # waits for the V100s
submit lstm-t4x1 --gres=gpu:t4:1
submit any-gpu-x2 --gres=gpu:2 --constraint=t4
sleep 3

echo "== 5. what slurmplan sees"
slurmplan status
echo
if [ "$ACCOUNTING" = 1 ]; then
    echo "-- fairshare: Slurm charges every job's GPU time to its account; slurmplan weighs accounts by it"
    weights() { python3 -c 'from slurmplan.slurm.accounting import read_accounting as r
v = r(); print("\n".join(f.describe() for f in (v.account_factors().values() if v else ())))'; }
    weights
    ALPHA=$(sbatch --parsable -A alpha --chdir="$JOBS" --gres=gpu:a100:2 --wrap 'sleep 4')
    for _ in $(seq 1 40); do [ -n "$(squeue -h -t completed -j "$ALPHA")" ] && break; sleep 1; done
    # slurmctld charges usage from its first fairshare pass on (PriorityCalcPeriod, 1 minute after start)
    for _ in $(seq 1 75); do
        case "$(weights)" in *"alpha: shares"*"2^(-0.000"*) sleep 1 ;; *) break ;; esac
    done
    echo "after a 4 s job of 2 A100 in account alpha (it used more, so it weighs less in the next rounds):"
    weights
fi
echo
echo "== 6. slurmplan schedules a managed workload, round after round"
# Managed jobs carry their hints in --comment (with the site's job_submit.lua, sbatch --plan-* options do the
# same) and are submitted held, as job_submit.lua holds them: slurmplan decides their GPU type, count and
# plan, then releases them. Each honours the checkpoint signal as the launcher does: checkpoint, requeue-hold.
cat >"$JOBS/checkpointing.sh" <<'EOF'
#!/bin/bash
trap 'echo "checkpoint at $(date +%T)"; scontrol requeuehold "$SLURM_JOB_ID"; exit 0' USR2
echo "start $(date +%T) on $SLURMD_NODENAME (restart ${SLURM_RESTART_COUNT:-0}): $(scontrol show job "$SLURM_JOB_ID" | grep -o 'AdminComment=.*')"
for _ in $(seq 1 "${1:-120}"); do sleep 1; done
echo "finished $(date +%T)"
EOF
managed() { # name, gpus, model, seconds
    sbatch --parsable --hold -J "$1" --chdir="$JOBS" -o "$JOBS/%x-%j.out" --open-mode=append --time=5 \
        --gres="gpu:$2" --comment "slurmplan:model=$3;gpus=$2;min=$2;max=$2" "$JOBS/checkpointing.sh" "$4"
}
managed gpt2-x4 4 gpt2 150
managed bert-x2 2 bert-large 40
managed vit-x1 1 vit-b 40
managed t5-x2 2 t5-large 150
managed llama-x4 4 llama2-7b 150
CONFIG=$SLURMPLAN_DEVCLUSTER_DIR/slurmplan.yaml
cat >"$CONFIG" <<EOF
database: $SLURMPLAN_DEVCLUSTER_DIR/journal.db
report_dir: $SLURMPLAN_DEVCLUSTER_DIR/reports
policy: las
round_s: 20
grace_s: 10
EOF
rm -f "$SLURMPLAN_DEVCLUSTER_DIR"/journal.db*
echo "-- the daemon: one tick every 5 s, a new round every 20 s (decisions as they happen)"
slurmplan daemon --config "$CONFIG" --interval 5 --max-ticks "${SLURMPLAN_DEMO_TICKS:-12}"

echo
echo "== 7. summary"
squeue -o "%.6i %.12j %.9T %.16b %.10N %r"
echo "-- journal (slurmplan history):"
slurmplan history --config "$CONFIG" --limit 25
FIRST=$(slurmplan history --config "$CONFIG" --json --limit 1000 | python3 -c 'import json,sys; r=[x["job_id"] for x in json.load(sys.stdin) if x["kind"]=="decision"]; print(r[0] if r else "")')
if [ -n "$FIRST" ]; then
    echo "-- why job $FIRST runs as it does (slurmplan explain $FIRST):"
    slurmplan explain "$FIRST" --config "$CONFIG"
fi

echo
# Jobs the daemon held (job_submit.lua holds every managed job; the daemon releases the ones a round picks)
# stay held now that the daemon has stopped: say which, and how to go on.
HELD=$(squeue -h -t PENDING -o "%i %r" | awk '$2 ~ /Held/ {print $1}' | paste -sd' ' -)
if [ -n "$HELD" ]; then
    echo "Held now: job(s) $HELD. A held job stays pending (priority 0) until slurmplan releases it in a later"
    echo "round, and nothing ticks now that the demo's daemon stopped. Its AdminComment says why it is held:"
    echo "  scontrol show job $(echo "$HELD" | cut -d' ' -f1) | grep AdminComment"
fi
echo "Run the daemon on (Ctrl-C stops it):  SLURMPLAN_CONFIG=$CONFIG slurmplan daemon --interval 5"
echo "One tick at a time instead:          SLURMPLAN_CONFIG=$CONFIG slurmplan tick"
echo "Release a held job by hand:          scontrol release JOBID (it runs as submitted until a daemon decides otherwise)"
echo
echo "The cluster keeps running. Try:  export SLURM_CONF=$SLURM_CONF; squeue; slurmplan status --json"
echo "Ask slurmplan:                   slurmplan explain JOBID --config $CONFIG; slurmplan history --config $CONFIG"
echo "Stop it with:                    slurmplan devcluster down"
