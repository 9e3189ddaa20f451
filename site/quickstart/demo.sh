#!/usr/bin/env bash
# Quick start (a): on a fresh Debian 12 machine, as root.
# Installs Slurm, munge and slurmplan, starts a local Slurm cluster of virtual GPU nodes (2 x 4 A100,
# 2 x 4 V100, 2 x 2 T4 on this one host), submits a small mixed workload and shows what slurmplan sees.
# The cluster keeps running afterwards; stop it with `slurmplan devcluster down`.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

if [ "$(id -u)" -ne 0 ]; then
    echo "demo.sh: run as root (the local cluster runs Slurm's daemons)" >&2
    exit 1
fi

echo "== 1. install Slurm, munge and Python (Debian packages)"
export DEBIAN_FRONTEND=noninteractive
PACKAGES="slurmctld slurmd slurm-client munge libslurm-dev python3 python3-pip"
if ! dpkg -s $PACKAGES >/dev/null 2>&1; then # skip apt entirely when all are there already
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
fi

echo "== 2. install slurmplan"
export PIP_ROOT_USER_ACTION=ignore
export PIP_BREAK_SYSTEM_PACKAGES=1 # Debian's Python refuses system-wide pip installs without it (PEP 668)
python3 -m pip install -q -e "$REPO"

echo "== 3. start the local development cluster"
export SLURMPLAN_DEVCLUSTER_DIR=${SLURMPLAN_DEVCLUSTER_DIR:-$REPO/.state/devcluster}
slurmplan devcluster up
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
echo "The cluster keeps running. Try:  export SLURM_CONF=$SLURM_CONF; squeue; slurmplan status --json"
echo "Stop it with:                    slurmplan devcluster down"
