#!/bin/sh
# build.sh builds the control plane internal/kubetest runs: kube-apiserver,
# kube-controller-manager and kube-scheduler of Kubernetes 1.37.2 (module
# scripts/kube/control) and etcd 3.6.16 (module scripts/kube/etcd), from their
# Go modules, into ${WAKEGATE_KUBE_BIN:-$HOME/.cache/wakegate/kube-1.37.2-etcd-3.6.16}.
#
# It does nothing when that directory already holds a finished build (the
# stamp file .built, written last). A cold build takes 24 CPU-minutes (22
# min on two busy cores, about 12 on idle ones), mostly compiling the packages
# the three Kubernetes commands share; with a warm Go build cache, 39 s.
set -eu

dir=${WAKEGATE_KUBE_BIN:-$HOME/.cache/wakegate/kube-1.37.2-etcd-3.6.16}
stamp=$dir/.built
if [ -f "$stamp" ]; then
	exit 0
fi

here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
rm -f "$stamp"
export GOWORK=off

start=$(date +%s)
echo "build.sh: building the Kubernetes control plane into $dir" >&2
# One go build for the three Kubernetes commands, so their shared packages
# compile once.
(cd "$here/control" && go build -trimpath -ldflags='-s -w' -o "$dir/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler)
(cd "$here/etcd" && go build -trimpath -ldflags='-s -w' -o "$dir/etcd" .)

printf 'kubernetes v1.37.2\netcd v3.6.16\n%s\n' "$(go version)" >"$stamp"
echo "build.sh: built in $(($(date +%s) - start))s" >&2
