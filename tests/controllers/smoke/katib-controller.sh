#!/usr/bin/env bash
# katib-controller.sh HOSTS CERTDIR KUBECONFIG KATIB_CONFIG: runs bin/katib-controller in a private mount
# namespace where /etc/hosts is HOSTS (names of Suggestion Services -> local addresses) and the
# hard-coded /tmp/cert is CERTDIR. Needs root (unshare -m).
set -euo pipefail
hosts=$1 certdir=$2 kc=$3 cfg=$4
bin=$(cd "$(dirname "$0")/.." && pwd)/bin/katib-controller
mkdir -p /tmp/cert
exec unshare -m --propagation private sh -c "mount --bind '$hosts' /etc/hosts && mount --bind '$certdir' /tmp/cert && exec env KUBECONFIG='$kc' '$bin' --katib-config='$cfg'"
