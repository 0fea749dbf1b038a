#!/usr/bin/env bash
# podns.sh: emulate one pod's shared PID + mount namespace (what a container runtime gives a pod with
# shareProcessNamespace: true) to run Katib's file-metricscollector beside a "training" process.
# Needs root. Usage: podns.sh TRIAL DBADDR
set -u
trial=$1 db=$2 bin=$(cd "$(dirname "$0")/.." && pwd)/bin
vol=$(mktemp -d /tmp/i15-pod-XXXX)
# "pause": PID 1 of a new PID namespace, with its own /proc and a private mount namespace
unshare --pid --mount --fork --mount-proc --propagation private sh -c "mkdir -p /var/log/katib && mount --bind $vol /var/log/katib && exec sleep 600" &
sleep 1
pause=$(pgrep -P $! -x sleep)
enter="nsenter -t $pause -p -m"
# the training container, rewritten by Katib's pod mutator for the StdOut collector
$enter sh -c "python3 -c 'import time; [print(\"epoch %d accuracy=0.%d\" % (i, i+5)) or time.sleep(0.5) for i in range(3)]' 1>/var/log/katib/metrics.log 2>&1 && echo completed > /var/log/katib/\$\$.pid" &
# the injected sidecar, with the args Katib gave it
$enter "$bin/file-metricscollector" -t "$trial" -m accuracy -o-type maximize -s-db "$db" -path /var/log/katib/metrics.log -format TEXT
echo "collector exit $?"; ls -la "$vol"; cat "$vol"/*
kill -KILL $pause 2>/dev/null; wait  # a PID namespace's init ignores SIGTERM from outside
