#!/usr/bin/env bash
# Builds the Kubeflow Training Operator v1 controller, Katib's Go components, Kueue's manager and the
# test cluster's DNS server (CoreDNS) from the Go module proxy into bin/ (next to this script);
# `make controllers` runs it.
# Each component has its own module (their Kubernetes dependencies differ from each other's and from
# tests/cluster's): training-operator/go.mod pins github.com/kubeflow/training-operator v1.9.4,
# katib/go.mod pins github.com/kubeflow/katib v0.19.0 (the commands are `tool` lines in those go.mod
# files, so `go mod tidy` keeps their requirements), coredns/go.mod pins github.com/coredns/coredns
# v1.15.0 with our own main.go choosing its plugins, kustomize/go.mod pins sigs.k8s.io/kustomize/kustomize/v5
# v5.7.1 (renders the controllers' released overlays; no kubectl needed), snapshot-controller/go.mod pins
# github.com/kubernetes-csi/external-snapshotter/v8 v8.7.0 (Kubernetes' volume snapshot controller),
# kueue/go.mod pins sigs.k8s.io/kueue v0.17.0 (its manager, cmd/kueue, as kueue-manager; needs Go >= 1.25.0),
# trainer/go.mod pins github.com/kubeflow/trainer/v2 v2.3.0 (Kubeflow Trainer v2's controller manager) and
# sigs.k8s.io/jobset v0.12.0, the JobSet Trainer's go.mod names (its controller, the module's root
# package, as jobset-controller): one module for both, so they share their compiled dependencies
# (Trainer's graph: Kubernetes v0.36.2 and controller-runtime v0.24.1 where JobSet pins v0.36.0, v0.24.0).
# Needs Go >= 1.26.0 (the `go` line of training-operator v1.9.4's own go.mod). Builds run one at a
# time under `nice -n 19`; a rebuild with warm Go caches only links.
set -euo pipefail
cd "$(dirname "$0")"
out=$PWD/bin
mkdir -p "$out"
export CGO_ENABLED=0
build() {  # build MODULE_DIR OUTPUT PACKAGE
  local start=$SECONDS
  (cd "$1" && nice -n 19 go build -trimpath -ldflags "-s -w" -o "$out/$2" "$3")
  echo "built $2 in $((SECONDS - start)) s ($(du -h "$out/$2" | cut -f1))"
}
build training-operator training-operator github.com/kubeflow/training-operator/cmd/training-operator.v1
build kustomize kustomize sigs.k8s.io/kustomize/kustomize/v5
build coredns coredns .
build snapshot-controller snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller
build katib katib-controller github.com/kubeflow/katib/cmd/katib-controller/v1beta1
build katib katib-db-manager github.com/kubeflow/katib/cmd/db-manager/v1beta1
build katib goptuna-suggestion github.com/kubeflow/katib/cmd/suggestion/goptuna/v1beta1
build katib goptuna-suggestion-listen ./goptuna
build katib file-metricscollector github.com/kubeflow/katib/cmd/metricscollector/v1beta1/file-metricscollector
build kueue kueue-manager sigs.k8s.io/kueue/cmd/kueue
build trainer trainer-controller-manager github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
build trainer jobset-controller sigs.k8s.io/jobset
