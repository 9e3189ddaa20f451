#!/usr/bin/env bash
# Capture the golden Slurm outputs the reader's tests read, from a real dev cluster of this machine's Slurm:
#   bash tests/slurm/data/capture.sh                                  (Debian 12: Slurm 22.05)
#   bash site/quickstart/debian13.sh run bash tests/slurm/data/capture.sh   (Debian 13: Slurm 24.11)
#   SLURMPLAN_DEBIAN_SUITE=forky bash site/quickstart/debian13.sh run bash tests/slurm/data/capture.sh   (26.05)
# The same four jobs each time: a running typed job with a comment, a running two-node job with a 30-minute
# limit, a held typed job, a running job without GPUs; plus an untyped job constrained to a GPU-type feature.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONPATH="$PWD"
DIR=$(mktemp -d /tmp/capture.XXXXXX)
trap 'python3 -m slurmplan.cli devcluster down --state-dir "$DIR" >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
python3 -m slurmplan.cli devcluster up --state-dir "$DIR" >/dev/null
export SLURM_CONF="$DIR/conf/slurm.conf"
V=$(scontrol --version | grep -oE '[0-9]+\.[0-9]+' | head -n1)
OUT=tests/slurm/data
sb() { sbatch --parsable -o /dev/null --chdir=/tmp "$@" --wrap='sleep 300'; }
sb --gres=gpu:a100:2 --comment=hello >/dev/null
sb -N2 --gres=gpu:v100:4 --time=30 >/dev/null
sb --gres=gpu:t4:1 --hold >/dev/null
sb >/dev/null
sb --gres=gpu:1 --constraint=t4 --hold >/dev/null
sleep 4
sinfo --json >"$OUT/sinfo_$V.json"
squeue --json --states=all >"$OUT/squeue_$V.json"
scontrol show config >"$OUT/show_config_$V.txt"
scontrol --version >"$OUT/version_$V.txt"
if scontrol show nodes --json >/tmp/nodes.json 2>/dev/null; then cp /tmp/nodes.json "$OUT/show_nodes_$V.json"; fi
scancel --full --state=RUNNING; scancel --state=PENDING
echo "captured Slurm $V into $OUT"
