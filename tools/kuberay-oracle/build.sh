#!/usr/bin/env bash
# Builds the KubeRay oracle (main.go: KubeRay's own RayCluster reconciler on a fake
# API server) from the KubeRay Go module pinned in versions.env, into a cache outside
# the checkout:
#
#   ${RAYSCALE_CACHE:-~/.cache/rayscale}/kuberay-oracle-<KubeRay version>-<hash>/
#     kuberay-oracle            the binary
#     ray.io_rayclusters.yaml   KubeRay's RayCluster CRD (its defaults), from the module cache
#     module-dir                the module's directory in the Go module cache; its
#                               config/samples/ holds KubeRay's sample RayClusters
#
# <hash> covers go.mod, go.sum, versions.env, this script, the Go sources and the Go version, so a
# fresh clone reuses what an earlier clone built. Prints the directory on stdout (progress
# goes to stderr).
set -euo pipefail
source "$(dirname "$0")/common.sh"

key="$( (cat go.mod go.sum versions.env common.sh ../../hack/gobuild.sh build.sh ./*.go; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-12)"
bindir="${cache_root}/kuberay-oracle-${KUBERAY_VERSION}-${key}"

complete() {
  [[ -x "${bindir}/kuberay-oracle" && -f "${bindir}/ray.io_rayclusters.yaml" && -f "${bindir}/module-dir" ]] || return 1
  # The module cache can be cleaned apart from ours (go clean -modcache): build again then.
  [[ -d "$(cat "${bindir}/module-dir")/config/samples" ]]
}
build_begin .kuberay-oracle.lock

start=$SECONDS
echo "kuberay-oracle: downloading modules (first run only) ..." >&2
go mod download
echo "kuberay-oracle: building against ${module}@${KUBERAY_VERSION} ..." >&2
"${go_build[@]}" -o "${tmp}/kuberay-oracle" .
echo "kuberay-oracle: built in $((SECONDS - start))s" >&2

# KubeRay's CRD and samples are read from the module cache (not copied into our repo).
dir="$(module_dir "$module")"
cp "${dir}/config/crd/bases/ray.io_rayclusters.yaml" "${tmp}/"
echo "$dir" > "${tmp}/module-dir"

build_done
