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

. site/quickstart/packages.sh

echo "== install Slurm, munge, MariaDB, Lua and a C toolchain (Debian packages)"
apt_install $SLURM_PACKAGES $BUILD_PACKAGES $PYTHON_PACKAGES

echo "== install slurmplan with its test and launcher extras"
pip_install torch==2.13.0 # the CPU build where the index offers it; pinned only here
pip_install -e '.[dev,launch]'

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
