#!/bin/bash
# Runs one nspawn lab host in a private mount namespace (started via `unshare --mount
# --propagation private`): the overlay root is mounted here, so it vanishes with this
# namespace even if everything is SIGKILLed; the machine's mount table never sees it.
# Restarts the container when it reboots itself (nspawn exits 133, as systemd-nspawn@ does).
# CGROUPS: colon-separated cgroup folders (one per hierarchy, may be empty) that nspawn is
# started in, so its payload/ and supervisor/ sub-cgroups are this host's alone (see
# cgroups.py). Only nspawn joins them, not this script: with nothing else in the folder,
# nspawn moving itself to supervisor/ leaves it free of processes, as cgroup2 wants.
# usage: supervise.sh LOWER UPPER WORK MERGED STATUSFILE CGROUPS -- systemd-nspawn ARGS...
set -u
lower=$1 upper=$2 work=$3 merged=$4 status=$5 cgroups=$6
shift 7
IFS=: read -r -a folders <<<"$cgroups"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$merged" || exit 90
child=""
stopping=0
trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM INT HUP
boots=0
while [ "$stopping" = 0 ]; do
    boots=$((boots + 1))
    (
        for folder in "${folders[@]}"; do
            [ -n "$folder" ] || continue
            echo "$BASHPID" >"$folder/cgroup.procs" || { echo "supervise.sh: cannot join $folder" >&2; exit 91; }
        done
        exec "$@" </dev/null
    ) &
    child=$!
    echo "boot $boots $child" >>"$status"
    wait "$child"; rc=$?
    # `wait` returns early when a trapped signal arrives: wait for the real exit status
    while kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done
    echo "exit $boots $rc" >>"$status"
    if [ "$rc" != 133 ] || [ "$stopping" = 1 ]; then
        break
    fi
done
exit 0
