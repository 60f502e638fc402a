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
# go.sum, versions.env, this script and the Go version, so a fresh clone reuses what an earlier
# clone built. One build at a time per cache root (a lock). Prints the directory on stdout (progress
# goes to stderr). hack/gang/local.py runs the binary against a cluster.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
source ./versions.env
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
module=sigs.k8s.io/scheduler-plugins
version="$SCHEDULER_PLUGINS_VERSION"

required="$(awk -v m="$module" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' go.mod)"
if [[ "$required" != "$version" ]] || ! grep -qx "tool ${module}/cmd/scheduler" go.mod; then
  echo "build.sh: go.mod must require ${module} ${version} (versions.env says so; it requires ${required:-nothing}) and list ${module}/cmd/scheduler as a tool; run ${here}/update-gomod.sh" >&2
  exit 1
fi

cache_root="${RAYSCALE_CACHE:-$HOME/.cache/rayscale}"
key="$( (cat go.mod go.sum versions.env build.sh; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-12)"
bindir="${cache_root}/gang-scheduler-${version}-${key}"
crd=scheduling.x-k8s.io_podgroups.yaml

complete() {
  [[ -x "${bindir}/gang-scheduler" && -f "${bindir}/${crd}" ]]
}
if complete; then echo "$bindir"; exit 0; fi
mkdir -p "$cache_root"
exec 9>"${cache_root}/.gang-scheduler.lock"
flock 9
if complete; then echo "$bindir"; exit 0; fi
tmp="${bindir}.tmp.$$"
rm -rf "$tmp"; mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

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

dir="$(go list -m -json "$module" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
cp "${dir}/manifests/coscheduling/crd.yaml" "${tmp}/${crd}"
chmod -R u+w "$tmp"  # the module cache is read-only; the cache directory is removed as a whole

rm -rf "$bindir"
mv "$tmp" "$bindir"
trap - EXIT
echo "$bindir"
