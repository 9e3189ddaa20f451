#!/usr/bin/env bash
# Capture real sacct output for `trace import --sacct`'s golden tests, from a dev cluster with MariaDB + slurmdbd
# of this machine's Slurm, as root:
#   bash site/quickstart/debian13.sh run bash tests/history/data/capture.sh    (Debian 13: Slurm 24.11)
#   SLURMPLAN_DEBIAN_SUITE=forky bash site/quickstart/debian13.sh run bash tests/history/data/capture.sh  (26.05)
# (The 22.05 files without a version in their names were captured by hand in the same way; data/README.md.)
# Writes, with V the Slurm version: all_$V.json (`sacct --json`), site_$V.txt (`--parsable2` with the columns
# slurm/sacct.py asks for), never_$V.json (the two jobs that never started) and ids_$V.json (each job's role ->
# its id, for the tests). About two minutes: the TIMEOUT job runs out its one-minute limit.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONPATH="$PWD"
DIR=$(mktemp -d /tmp/capture.XXXXXX)
trap 'python3 -m slurmplan.cli devcluster down --state-dir "$DIR" >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
python3 -m slurmplan.cli devcluster up --accounting --state-dir "$DIR" >/dev/null
export SLURM_CONF="$DIR/conf/slurm.conf"
V=$(scontrol --version | grep -oE '[0-9]+\.[0-9]+' | head -n1)
OUT=tests/history/data
sb() { sbatch --parsable -o /dev/null --chdir=/tmp "$@"; }
typed=$(sb --gres=gpu:a100:2 --wrap='sleep 4')
cpu_only=$(sb -c 2 --wrap='sleep 2')
failed=$(sb --gres=gpu:t4:1 --wrap='sleep 1; exit 3')
untyped=$(sb --gres=gpu:1 --constraint=v100 --wrap='sleep 3')
account=$(sb -A beta -p debug --gres=gpu:v100:2 --wrap='sleep 2')
weird=$(sb -J 'weird|name' --gres=gpu:t4:1 --wrap='sleep 2')
timeout=$(sb --time=1 --gres=gpu:v100:1 --wrap='sleep 120')
model=$(sb --hold --gres=gpu:v100:2 --wrap='sleep 3')
scontrol update job="$model" AdminComment='slurmplan:model=bert-large;gpus=2;batch=64;class=guaranteed || slurmplan: v100x2 dp2 tp1 pp1 mb1 ga1 | round 1'
scontrol release "$model"
sleep 6 # the typed job ends: the two-node job below starts on the a100 nodes it frees
multi=$(sb -N2 --gres=gpu:a100:4 --wrap='sleep 5')
begin=$(sb --begin=now+3600 --gres=gpu:t4:1 --wrap='sleep 1')
held=$(sb --hold --gres=gpu:t4:1 --wrap='sleep 1')
sleep 2
scancel "$begin" "$held"
for _ in $(seq 150); do # every job ended (the TIMEOUT one last, after its minute and Slurm's kill wait)
    [ -z "$(squeue -h -o %i)" ] && break
    sleep 1
done
sleep 3 # slurmdbd has the last records
START=2020-01-01
sacct --json -a -S "$START" -E now >"$OUT/all_$V.json"
sacct --json -a -S "$START" -E now -j "$begin,$held" >"$OUT/never_$V.json"
FIELDS=$(python3 -c 'from slurmplan.slurm.sacct import PARSABLE_FIELDS; print(",".join(PARSABLE_FIELDS))')
sacct -a -S "$START" -E now --allocations --parsable2 --format "$FIELDS" >"$OUT/site_$V.txt"
cat >"$OUT/ids_$V.json" <<EOF
{"typed": $typed, "cpu_only": $cpu_only, "failed": $failed, "untyped": $untyped, "account": $account,
 "weird": $weird, "timeout": $timeout, "model": $model, "multi": $multi, "begin": $begin, "held": $held}
EOF
echo "captured sacct of Slurm $V into $OUT"
