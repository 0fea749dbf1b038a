#!/usr/bin/env bash
# Builds the tests' Kubernetes control plane from the Go module proxy into tests/cluster/bin/:
# kube-apiserver, kube-controller-manager and kube-scheduler of the k8s.io/kubernetes release pinned
# in go.mod, and etcd (main.go, go.etcd.io/etcd/server/v3). Go's module and build caches are reused,
# so a rebuild after a clean checkout only links. Needs Go >= the `go` line of go.mod.
set -euo pipefail
cd "$(dirname "$0")"
out=bin
mkdir -p "$out"
version=$(awk '$1 == "k8s.io/kubernetes" {print $2}' go.mod)
minor=$(echo "$version" | cut -d. -f2)
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
export CGO_ENABLED=0
go build -trimpath -ldflags "$ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
go build -trimpath -ldflags "-s -w" -o "$out/etcd" .
echo "$version" > "$out/VERSION"
