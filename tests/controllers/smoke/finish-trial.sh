#!/usr/bin/env bash
# finish-trial.sh NS TRIAL: report metrics for TRIAL through the real file-metricscollector (podns.sh),
# then mark its Job's pod Succeeded as the status-mode kubelet would.
set -eu
ns=$1 t=$2 dir=$(dirname "$0")
timeout 60 "$dir/podns.sh" "$t" 127.0.0.1:6790 > /dev/null 2>&1 </dev/null
p=$(kubectl -n "$ns" get pods -l batch.kubernetes.io/job-name="$t" -o jsonpath='{.items[0].metadata.name}')
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
term="{\"terminated\":{\"exitCode\":0,\"reason\":\"Completed\",\"startedAt\":\"$now\",\"finishedAt\":\"$now\"}}"
kubectl -n "$ns" patch pod "$p" --subresource=status --type=merge -p "{\"status\":{\"phase\":\"Succeeded\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"PodCompleted\"}],\"containerStatuses\":[{\"name\":\"training\",\"image\":\"t\",\"imageID\":\"\",\"ready\":false,\"restartCount\":0,\"state\":$term},{\"name\":\"metrics-logger-and-collector\",\"image\":\"c\",\"imageID\":\"\",\"ready\":false,\"restartCount\":0,\"state\":$term}]}}" > /dev/null
