#!/bin/bash
# Runs one nspawn lab host in a private mount namespace (started via `unshare --mount
# --propagation private`): the overlay root is mounted here, so it vanishes with this
# namespace even if everything is SIGKILLed; the machine's mount table never sees it.
# Restarts the container when it reboots itself (nspawn exits 133, as systemd-nspawn@ does).
# usage: supervise.sh LOWER UPPER WORK MERGED STATUSFILE -- systemd-nspawn ARGS...
set -u
lower=$1 upper=$2 work=$3 merged=$4 status=$5
shift 6
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$merged" || exit 90
child=""
stopping=0
trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM INT HUP
boots=0
while [ "$stopping" = 0 ]; do
    boots=$((boots + 1))
    "$@" </dev/null &
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
