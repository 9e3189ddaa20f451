#!/usr/bin/env bash
# Run one of README's quick-start commands on a fresh Debian root, as on a fresh machine, as root:
#
#   bash site/quickstart/fresh-root.sh bookworm site/quickstart/demo.sh     # Debian 12, Slurm 22.05
#   bash site/quickstart/fresh-root.sh trixie site/quickstart/demo.sh       # Debian 13, Slurm 24.11
#
# Makes `debootstrap --variant=minbase SUITE` in $SLURMPLAN_FRESH (default /tmp/slurmplan-fresh; reused while it
# exists: delete it to start over), copies this checkout's HEAD into /root/slurmplan there, and runs the script
# inside with bash, as root, in private pid/mount/uts namespaces: everything it starts ends with it. Unlike
# debian13.sh the root keeps the host's network, since the script under test installs from apt and PyPI itself.
# Package services are not started by apt inside (policy-rc.d), as there is no init; the dev cluster starts its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "fresh-root.sh: run as root" >&2; exit 1; }
[ "$#" -eq 2 ] || { echo "usage: fresh-root.sh bookworm|trixie SCRIPT" >&2; exit 2; }
SUITE=$1 SCRIPT=$2
BASE=${SLURMPLAN_FRESH:-/tmp/slurmplan-fresh}
R=$BASE/$SUITE
MIRROR=$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ \
    2>/dev/null | awk '{print $2}' | head -n1 || true)
if [ ! -e "$R/.ready" ]; then
    command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
    rm -rf "$R" && mkdir -p "$BASE"
    echo "== debootstrap --variant=minbase $SUITE"
    debootstrap --variant=minbase "$SUITE" "$R" "${MIRROR:-http://deb.debian.org/debian}" >"$BASE/$SUITE.log" 2>&1 ||
        { echo "fresh-root.sh: debootstrap failed; see $BASE/$SUITE.log" >&2; exit 1; }
    cp /etc/resolv.conf "$R/etc/resolv.conf"
    mkdir -p "$R/usr/local/share/ca-certificates" # the machine's own CA certificates (a proxy's), if any
    cp /usr/local/share/ca-certificates/*.crt "$R/usr/local/share/ca-certificates/" 2>/dev/null || true
    printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d" && chmod 755 "$R/usr/sbin/policy-rc.d"
    chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive sh -c \
        'apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates >/dev/null && update-ca-certificates >/dev/null'
    touch "$R/.ready"
fi
rm -rf "$R/root/slurmplan" && mkdir -p "$R/root/slurmplan"
git archive HEAD | tar -x -C "$R/root/slurmplan"
echo "== $SCRIPT in a fresh Debian $SUITE root ($R)"
unshare --mount --pid --uts --fork --kill-child -- bash -s -- "$R" "$SUITE" "$SCRIPT" <<'INNER'
set -euo pipefail
R=$1 SUITE=$2 SCRIPT=$3
mount --make-rprivate /
hostname "fresh-$SUITE"
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --rbind /dev "$R/dev"
mount -t tmpfs tmpfs "$R/tmp"
mount -t tmpfs tmpfs "$R/run"
echo "127.0.0.1 localhost fresh-$SUITE" >"$R/etc/hosts"
exec chroot "$R" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    TMPDIR=/tmp bash -c 'cd /root/slurmplan && exec bash "$0"' "$SCRIPT"
INNER
