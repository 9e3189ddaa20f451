#!/usr/bin/env bash
# A Debian 13 (trixie) root with Slurm 24.11, for running slurmplan's Slurm-facing tests on 24.11 from a Debian 12
# machine (or any Linux with debootstrap), as root.
#
#   bash site/quickstart/debian13.sh root            make (or reuse) the root; prints its path
#   bash site/quickstart/debian13.sh run CMD...      run CMD inside the root, in a private network namespace,
#                                                    from this checkout (mounted at the same path), with the
#                                                    host's Python (its prefix mounted at the same path)
#   bash site/quickstart/debian13.sh test [ARGS]     run pytest inside it (default: the Slurm-facing tests)
#
# The root is cached in $SLURMPLAN_CACHE (default /var/cache/slurmplan/trixie-root) and made once with
# `debootstrap --variant=minbase trixie` from the mirror this machine's apt sources name (~20 s + ~15 s apt).
# SLURMPLAN_DEBIAN_SUITE=forky makes and uses a Debian forky (testing) root instead, with Slurm 26.05 (forky-root;
# CI runs trixie only: a testing suite's packages move under it).
# Why a private namespace: the root's slurmctld/slurmd/munged must not see or clash with the host's, and
# nothing started inside can outlive the command (the namespace's PID 1 takes them all down on exit).
# Why 127.0.0.2: inside a fresh network namespace glibc's address lookup ignores a lone 127.0.0.1 and slurmctld
# exits with "Unable to listen"; slurmd 24.11 needs a cgroup filesystem, so /sys/fs/cgroup is bound in.
set -euo pipefail
cd "$(dirname "$0")/../.."
CHECKOUT="$PWD"
CACHE="${SLURMPLAN_CACHE:-/var/cache/slurmplan}"
SUITE="${SLURMPLAN_DEBIAN_SUITE:-trixie}"
ROOT="$CACHE/$SUITE-root"
. site/quickstart/packages.sh
# test.sh's packages but Python (the host's is borrowed), and what a minbase root lacks for it and for the tests
PACKAGES="$SLURM_PACKAGES $BUILD_PACKAGES procps iproute2 util-linux ca-certificates libssl3t64 libsqlite3-0 libffi8
 zlib1g liblzma5 libbz2-1.0 libreadline8t64 libncursesw6 libgdbm6t64 libuuid1"
STAMP="$ROOT/.slurmplan-ready-$(echo $PACKAGES | md5sum | cut -c1-8)" # a new package list: installed on top
# every test module that starts a Slurm cluster (tests/test_debian13_stage.py checks that none is left out)
DEFAULT_TESTS="tests/slurm tests/control tests/integration tests/replay tests/accounting tests/history tests/security
 tests/launch/test_launch_slurm.py tests/launch/test_launch_submitit.py tests/launch/test_launch_args_cli.py
 tests/sim/test_compare_on_slurm.py"

die() { echo "debian13.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, namespaces and Slurm's daemons need it)"

mirror() { # the Debian mirror this machine's apt sources name (deb822 or one-line format)
    local m
    m=$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
        awk '{print $2}' | head -n1 || true)
    echo "${m:-http://deb.debian.org/debian}"
}

apt_in_root() { # $1: the root; installs $PACKAGES (the host's network: before any namespace)
    # no package may start its service (mariadb, munge, slurm*) in the chroot, on the host's network
    printf '#!/bin/sh\nexit 101\n' >"$1/usr/sbin/policy-rc.d"
    chmod 755 "$1/usr/sbin/policy-rc.d"
    local update="apt-get update -qq" ok=0
    if [ "$SUITE" != trixie ]; then
        # a testing suite: its Release may be past Valid-Until on a mirror snapshot, and forky's mariadb-server
        # and tmux configure only with /proc mounted
        update="apt-get -o Acquire::Check-Valid-Until=false update -qq"
        mount -t proc proc "$1/proc"
    fi
    chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
        sh -c "$update && apt-get install -y -qq --no-install-recommends $(echo $PACKAGES) >/dev/null && update-ca-certificates >/dev/null" \
        >>"$CACHE/debootstrap.log" 2>&1 || ok=$?
    if [ "$SUITE" != trixie ]; then umount "$1/proc"; fi
    [ "$ok" -eq 0 ] || die "apt-get inside the root failed; see $CACHE/debootstrap.log"
    chroot "$1" sh -c 'apt-get clean; rm -rf /var/lib/apt/lists/*'
}

make_root() {
    if [ -e "$STAMP" ]; then echo "$ROOT"; return; fi
    if [ -d "$ROOT/etc" ]; then # an older package list: add what is new
        echo "== apt-get install the new packages inside the root" >&2
        apt_in_root "$ROOT"
        rm -f "$ROOT"/.slurmplan-ready-*
        touch "$STAMP"
        echo "$ROOT"
        return
    fi
    command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
    mkdir -p "$CACHE"
    rm -rf "$ROOT.tmp"
    echo "== debootstrap --variant=minbase $SUITE ($(mirror))" >&2
    local script=/usr/share/debootstrap/scripts/$SUITE
    [ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid # Debian 12's debootstrap predates forky
    debootstrap --variant=minbase "$SUITE" "$ROOT.tmp" "$(mirror)" "$script" >"$CACHE/debootstrap.log" 2>&1 ||
        die "debootstrap failed; see $CACHE/debootstrap.log"
    cp /etc/resolv.conf "$ROOT.tmp/etc/resolv.conf"
    # the machine's own CA certificates (a proxy's), so apt/pip inside the root verify what they fetch
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        mkdir -p "$ROOT.tmp/usr/local/share/ca-certificates"
        cp /usr/local/share/ca-certificates/*.crt "$ROOT.tmp/usr/local/share/ca-certificates/"
    fi
    echo "== apt-get install Slurm and friends inside the $SUITE root" >&2
    apt_in_root "$ROOT.tmp"
    touch "$ROOT.tmp/$(basename "$STAMP")"
    mv "$ROOT.tmp" "$ROOT"
    echo "$ROOT"
}

python_prefix() { # the host Python's installation, mounted into the root at the same path
    python3 -c 'import sys, os; print(os.path.realpath(sys.base_prefix))'
}

run_inside() {
    make_root >/dev/null
    local prefix
    prefix=$(python_prefix)
    case "$prefix" in
    /usr | /usr/local) die "the host's python3 lives in $prefix, which the root cannot borrow; use a pyenv or venv Python" ;;
    esac
    # everything after -- runs as PID 1's child in new net/mount/pid/uts namespaces
    CI="${CI:-}" unshare --net --mount --pid --uts --fork --kill-child -- bash -s -- "$ROOT" "$CHECKOUT" "$prefix" "$SUITE" "$@" <<'INNER'
set -euo pipefail
ROOT=$1 CHECKOUT=$2 PREFIX=$3 SUITE=$4; shift 4
mount --make-rprivate /
echo "slurmplan-$SUITE" >/proc/sys/kernel/hostname
chroot "$ROOT" ip link set lo up # the root's iproute2: the host may have none
chroot "$ROOT" ip addr add 127.0.0.2/8 dev lo
mount -t proc proc "$ROOT/proc"
mount --rbind /sys "$ROOT/sys"
mount --rbind /dev "$ROOT/dev"
mount -t tmpfs tmpfs "$ROOT/tmp"
mount -t tmpfs tmpfs "$ROOT/run"
mkdir -p "$ROOT$CHECKOUT" "$ROOT$PREFIX"
mount --bind "$CHECKOUT" "$ROOT$CHECKOUT"
mount --bind "$PREFIX" "$ROOT$PREFIX"
# the SPANK plugin is built against this Slurm's spank.h: build it apart, never reuse the host's 22.05 build
mkdir -p "$ROOT/tmp/.spank"
cp -a "$CHECKOUT/spank/." "$ROOT/tmp/.spank/"
rm -f "$ROOT/tmp/.spank/"*.so "$ROOT/tmp/.spank/"*.o
mount --bind "$ROOT/tmp/.spank" "$ROOT$CHECKOUT/spank"
echo "127.0.0.1 localhost slurmplan-$SUITE" >"$ROOT/etc/hosts"
cd /
exec chroot "$ROOT" env -i PATH="$PREFIX/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME=/root LANG=C.UTF-8 \
    PYTHONPATH="$CHECKOUT" CI="${CI:-}" TMPDIR=/tmp \
    bash -c 'cd "$0" && exec "$@"' "$CHECKOUT" "$@"
INNER
}

cmd="${1:-}"
shift || true
case "$cmd" in
root) make_root ;;
run) [ "$#" -gt 0 ] || die "usage: debian13.sh run CMD..."; run_inside "$@" ;;
test)
    case "${1:-}" in "" | -*) set -- $DEFAULT_TESTS "$@" ;; esac # the default
    status=0
    run_inside python3 -m pytest -p no:cacheprovider "$@" || status=$?
    [ "$status" -ne 5 ] || die "pytest collected no tests"
    exit "$status"
    ;;
*) die "usage: debian13.sh root | run CMD... | test [PYTEST ARGS]" ;;
esac
