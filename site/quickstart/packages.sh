# Sourced by demo.sh, test.sh and debian13.sh: the Debian packages each needs, stated once, and the one way they
# are installed.
# shellcheck shell=bash

# Slurm's daemons and tools, munge, and the dev cluster's accounting (slurmdbd on a private MariaDB)
SLURM_PACKAGES="slurmctld slurmd slurm-client munge libslurm-dev slurmdbd mariadb-server"
# what the tests build and run besides: job_submit.lua (Lua 5.1 and 5.3), the SPANK plugin (gcc, make), tmux
BUILD_PACKAGES="lua5.1 lua5.3 liblua5.3-dev gcc make libc6-dev tmux"
PYTHON_PACKAGES="python3 python3-pip"

apt_install() { # PACKAGE...: apt-get install them, skipping apt entirely when all are there already
    export DEBIAN_FRONTEND=noninteractive
    if ! dpkg -s "$@" >/dev/null 2>&1; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    fi
}

pip_install() { # PIP ARGS...: into the system Python, as root
    # Debian's Python refuses system-wide pip installs without PIP_BREAK_SYSTEM_PACKAGES (PEP 668)
    PIP_ROOT_USER_ACTION=ignore PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q "$@"
}
