#!/usr/bin/env bash
# sa-kubeconfig.sh NS SA OUT: a kubeconfig for ServiceAccount NS/SA (a 24 h TokenRequest token), same
# server and CA as $KUBECONFIG's current context, so an out-of-cluster controller runs under its own RBAC.
set -euo pipefail
ns=$1 sa=$2 out=$3
server=$(kubectl config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kubectl config view --minify --raw -o jsonpath="{.clusters[0].cluster.certificate-authority-data}"); [ -n "$ca" ] || ca=$(base64 -w0 < "$(kubectl config view --minify --raw -o jsonpath="{.clusters[0].cluster.certificate-authority}")")
token=$(kubectl -n "$ns" create token "$sa" --duration 24h)
cat > "$out" <<EOC
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$server", certificate-authority-data: "$ca"}}]
users: [{name: u, user: {token: "$token"}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: $ns}}]
current-context: x
EOC
