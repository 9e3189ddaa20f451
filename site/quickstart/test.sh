#!/usr/bin/env bash
# Quick start (b): on a fresh Debian 12 or 13 machine, as root: install everything the tests need and run them
# all (and, with no arguments, the Slurm-facing tests once more on Slurm 24.11 in a Debian 13 root).
# The Slurm tests start their own local clusters (in temporary directories) and stop them again.
# Exits non-zero when ruff finds a problem, when a test fails, or when no test ran at all.
# Arguments, if any, replace the default pytest target `tests/` (e.g. `bash site/quickstart/test.sh tests/slurm`).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: run as root (the Slurm tests run Slurm's daemons)" >&2
    exit 1
fi

echo "== install Slurm, munge, Lua and a C toolchain (Debian packages)"
export DEBIAN_FRONTEND=noninteractive
PACKAGES="slurmctld slurmd slurm-client munge libslurm-dev slurmdbd mariadb-server lua5.1 lua5.3 liblua5.3-dev gcc make libc6-dev python3 python3-pip tmux"
if ! dpkg -s $PACKAGES >/dev/null 2>&1; then # skip apt entirely when all are there already
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
fi

echo "== install slurmplan with its test and launcher extras"
export PIP_ROOT_USER_ACTION=ignore
export PIP_BREAK_SYSTEM_PACKAGES=1 # Debian's Python refuses system-wide pip installs without it (PEP 668)
python3 -m pip install -q torch==2.13.0 # the CPU build where the index offers it; pinned only here
python3 -m pip install -q -e '.[dev,launch]'

echo "== ruff"
python3 -m ruff check .

echo "== pytest (Slurm $(slurmd -V | grep -oE '[0-9]+\.[0-9]+' | head -n1))"
status=0
full=0
if [ "$#" -eq 0 ]; then
    set -- tests/
    full=1
fi
python3 -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "test.sh: pytest collected no tests" >&2
    exit 1
fi

# The whole run (no arguments) also runs the Slurm-facing tests on Slurm 24.11, in a Debian 13 root made with
# debootstrap (cached in /var/cache/slurmplan) and entered in a private network namespace; skip it with
# SLURMPLAN_SKIP_DEBIAN13=1 (e.g. on a machine without network access to a Debian mirror).
if [ "$full" -eq 1 ] && [ "${SLURMPLAN_SKIP_DEBIAN13:-}" != 1 ] && ! slurmd -V | grep -q ' 24\.11'; then
    echo "== the Slurm-facing tests on Slurm 24.11 (Debian 13 root: site/quickstart/debian13.sh)"
    bash site/quickstart/debian13.sh test -q || status=$?
fi
exit "$status"
