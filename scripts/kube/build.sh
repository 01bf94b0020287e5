#!/bin/sh
# build.sh builds the control plane internal/kubetest runs into
# ${WAKEGATE_KUBE_BIN:-$HOME/.cache/wakegate/kube-1.37.2-etcd-3.7.0}/kube: one
# program (module scripts/kube/control) holding kube-apiserver,
# kube-controller-manager and kube-scheduler of Kubernetes 1.37.2 and the
# etcd 3.7.0 server, its first argument naming the component. One program
# links once and compiles the packages the four share once.
#
# It does nothing when that directory already holds a finished build (the
# stamp file .built, written last). A cold build costs COLD_COST (see
# docs/kubernetes-testing.md); with a warm Go build cache it only links.
set -eu

dir=${WAKEGATE_KUBE_BIN:-$HOME/.cache/wakegate/kube-1.37.2-etcd-3.7.0}
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
(cd "$here/control" && go build -trimpath -ldflags='-s -w' -o "$dir/kube" .)

printf 'kubernetes v1.37.2\netcd v3.7.0\n%s\n' "$(go version)" >"$stamp"
echo "build.sh: built in $(($(date +%s) - start))s" >&2
