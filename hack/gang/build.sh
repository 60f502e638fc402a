#!/usr/bin/env bash
# Builds scheduler-plugins' kube-scheduler (the sigs.k8s.io/scheduler-plugins module's cmd/scheduler
# main package, unchanged: the default plugins plus Coscheduling and the project's others) at the
# version pinned in versions.env, into a cache outside the checkout:
#
#   ${RAYSCALE_CACHE:-~/.cache/rayscale}/gang-scheduler-<version>-<hash>/
#     gang-scheduler                    the binary (kube-scheduler's flags: --config FILE, ...)
#     scheduling.x-k8s.io_podgroups.yaml  the PodGroup CRD of that version (manifests/coscheduling)
#
# both from the module cache, not kept in this repository. The Coscheduling plugin reads a PodGroup's
# spec alone (minMember, minResources, scheduleTimeoutSeconds): scheduler-plugins' controller, which
# writes PodGroup status, is not needed to gang-schedule and is not built. <hash> covers go.mod,
# go.sum, versions.env, this script, hack/gobuild.sh and the Go version, so a fresh clone reuses what an earlier
# clone built. One build at a time per cache root (a lock). Prints the directory on stdout (progress
# goes to stderr). hack/gang/local.py runs the binary against a cluster.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
source ./versions.env
source ../gobuild.sh
module=sigs.k8s.io/scheduler-plugins
version="$SCHEDULER_PLUGINS_VERSION"
check_gomod "$module" "$version" "${module}/cmd/scheduler"
bindir="${cache_root}/gang-scheduler-${version}-$(build_key go.mod go.sum versions.env build.sh)"
crd=scheduling.x-k8s.io_podgroups.yaml

complete() {
  [[ -x "${bindir}/gang-scheduler" && -f "${bindir}/${crd}" ]]
}
build_begin .gang-scheduler.lock

start=$SECONDS
echo "gang-scheduler: downloading modules (first run only) ..." >&2
go mod download
echo "gang-scheduler: downloaded in $((SECONDS - start))s; building ${module}/cmd/scheduler@${version} ..." >&2
# The version of the Kubernetes it links (k8s.io/kubernetes as go.mod replaces it), stamped into
# component-base as Kubernetes' own build stamps a kube-scheduler. scheduler-plugins' Makefile stamps
# its own version there (v0.34.7), which this kube-scheduler's compatibility check reads as Kubernetes
# 0.34 and refuses ("emulation version 0.34 is not between [1.31, 0.34.0]"). -dwarf=false: no debug
# information compiled (-w drops it at the link anyway), a sixth less compile time.
kube_version="$(go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/kubernetes)"
minor="${kube_version#v1.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X ${pkg}.gitVersion=${kube_version} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
done
go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" -o "${tmp}/gang-scheduler" "${module}/cmd/scheduler"
echo "gang-scheduler: built in $((SECONDS - start))s" >&2

dir="$(module_dir "$module")"
cp "${dir}/manifests/coscheduling/crd.yaml" "${tmp}/${crd}"
build_done
