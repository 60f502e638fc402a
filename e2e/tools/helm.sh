#!/usr/bin/env bash
# Prints the path of Helm, built (once per version) with the local control plane's binaries:
# hack/localk8s/build.sh builds Helm (HELM_VERSION in hack/localk8s/versions.env) in the same
# `go build` as the control plane, so the Kubernetes libraries both link compile once. `make helm`
# runs it; a first run builds the control plane too.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bindir="$("${root}/hack/localk8s/build.sh")"
echo "${bindir}/helm"
