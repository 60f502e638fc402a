#!/usr/bin/env bash
# Builds Kueue's manager (the sigs.k8s.io/kueue module's cmd/kueue main package, unchanged) at the
# version pinned in versions.env, into a cache outside the checkout:
#
#   ${RAYSCALE_CACHE:-~/.cache/rayscale}/kueue-<Kueue version>-<hash>/
#     kueue                     the binary (flags: --config FILE, --feature-gates, --zap-log-level;
#                               the kubeconfig from $KUBECONFIG)
#     crd/                      Kueue's CRDs of that version and the kustomization that gives five
#                               of them a conversion webhook (config/components/crd)
#     webhook-manifests.yaml    Kueue's webhook configurations as generated (config/components/webhook)
#
# all copied from the module cache, not kept in this repository. <hash> covers go.mod, go.sum,
# versions.env, this script, hack/gobuild.sh and the Go version, so a fresh clone reuses what an earlier clone
# built. One build at a time per cache root (a lock). Prints the directory on stdout (progress goes
# to stderr). hack/kueue/local.py runs the binary against a cluster.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
source ./versions.env
source ../gobuild.sh
module=sigs.k8s.io/kueue
check_gomod "$module" "$KUEUE_VERSION" "${module}/cmd/kueue"
bindir="${cache_root}/kueue-${KUEUE_VERSION}-$(build_key go.mod go.sum versions.env build.sh)"

complete() {
  [[ -x "${bindir}/kueue" && -f "${bindir}/crd/kustomization.yaml" && -f "${bindir}/webhook-manifests.yaml" ]]
}
build_begin .kueue.lock

start=$SECONDS
echo "kueue: downloading modules (first run only) ..." >&2
go mod download
echo "kueue: downloaded in $((SECONDS - start))s; building ${module}/cmd/kueue@${KUEUE_VERSION} ..." >&2
# Kueue's Makefile stamps its version the same way (pkg/version); -dwarf=false: no debug
# information compiled (-w drops it at the link anyway), a sixth less compile time.
ldflags="-s -w -X ${module}/pkg/version.GitVersion=${KUEUE_VERSION} -X ${module}/pkg/version.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" -o "${tmp}/kueue" "${module}/cmd/kueue"
echo "kueue: built in $((SECONDS - start))s" >&2

dir="$(module_dir "$module")"
cp -r "${dir}/config/components/crd" "${tmp}/crd"
cp "${dir}/config/components/webhook/manifests.yaml" "${tmp}/webhook-manifests.yaml"
build_done
