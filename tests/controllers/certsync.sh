#!/usr/bin/env bash
# certsync.sh NS SECRET DIR: stand-in for the kubelet's Secret volume: copies the cert-controller
# rotator's Secret (tls.crt, tls.key, ca.crt) into DIR once it is filled, then every 10 s.
set -u
ns=$1 secret=$2 dir=$3
mkdir -p "$dir"
while true; do
  for k in tls.crt tls.key ca.crt; do
    v=$(kubectl -n "$ns" get secret "$secret" -o "go-template={{index .data \"$k\"}}" 2>/dev/null)
    [ -n "$v" ] && [ "$v" != "<no value>" ] && echo "$v" | base64 -d > "$dir/$k.tmp" && mv "$dir/$k.tmp" "$dir/$k"
  done
  sleep "${INTERVAL:-2}"
done
