#!/usr/bin/env bash
# Builds the local control plane's binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok) and Helm from the pinned Go
# module in this directory, into a cache outside the checkout:
#
#   ${RAYSCALE_CACHE:-~/.cache/rayscale}/k8s-<k8s version>-<hash>/
#
# <hash> covers go.mod, go.sum, versions.env, this script and the Go version, so a
# fresh clone reuses what an earlier clone built and a version bump builds anew.
# Prints the binary directory on stdout (progress goes to stderr).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
source ./versions.env
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

cache_root="${RAYSCALE_CACHE:-$HOME/.cache/rayscale}"
key="$( (cat go.mod go.sum versions.env build.sh; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-12)"
bindir="${cache_root}/k8s-${K8S_VERSION}-${key}"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm)

complete() {
  for b in "${binaries[@]}"; do [[ -x "${bindir}/${b}" ]] || return 1; done
  [[ -f "${bindir}/stages/pod-ready.yaml" ]]
}
if complete; then
  echo "$bindir"
  exit 0
fi

mkdir -p "$cache_root"
# One build at a time per cache root (parallel test sessions, make targets).
exec 9>"${cache_root}/.build.lock"
flock 9
if complete; then echo "$bindir"; exit 0; fi

tmp="${bindir}.tmp.$$"
rm -rf "$tmp"; mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
kver=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kver+=" -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
  kver+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${build_date}"
done
kwokver="-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${K8S_VERSION#v}"
# Helm's version, and the Kubernetes version `helm template` assumes (its Makefile stamps them;
# unstamped, Helm assumes Kubernetes v1.20).
helmver="-X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  helmver+=" -X ${pkg}.k8sVersionMajor=1 -X ${pkg}.k8sVersionMinor=${minor}"
done

# One `go build` for all seven: the go command schedules every package of them on every core and
# links them side by side, instead of builds one after the other that each end on one core (a
# link), and compiles the Kubernetes libraries Helm shares with the others once. A -X of a package
# a binary does not link is ignored, so one set of flags fits all. -dwarf=false: no debug
# information is compiled (-w drops it at the link anyway), a sixth less compile time.
packages=(go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
          k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl sigs.k8s.io/kwok/cmd/kwok
          helm.sh/helm/v3/cmd/helm)
start=$SECONDS
echo "localk8s: downloading modules (first run only) ..." >&2
go mod download
echo "localk8s: downloaded in $((SECONDS - start))s; building ${binaries[*]} ..." >&2
go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $kver $kwokver $helmver" -o "${tmp}/" "${packages[@]}"
mv "${tmp}/server" "${tmp}/etcd"  # go.etcd.io/etcd/server/v3: go names it after "server"
echo "localk8s: built in $((SECONDS - start))s" >&2

# kwok needs Stage documents to move nodes and pods through their lifecycle. We use
# its own "fast" stage set, read from the module cache (not copied into our repo).
kwok_dir="$(go list -m -json "sigs.k8s.io/kwok" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
mkdir -p "${tmp}/stages"
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
         pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
  cp "${kwok_dir}/kustomize/stage/${f}" "${tmp}/stages/"
done

rm -rf "$bindir"
mv "$tmp" "$bindir"
trap - EXIT
echo "$bindir"
