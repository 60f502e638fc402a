#!/usr/bin/env bash
# Builds Helm from the Go module proxy into the cache (once per Helm and Go version) and
# prints the path of the binary. `make helm` runs it.
set -euo pipefail
HELM_VERSION=v3.21.4
# The Kubernetes minor Helm v3.21.4 is built against (its go.mod: client-go v0.36). Helm's
# Makefile stamps it; without it `helm template` assumes Kubernetes v1.20.
K8S_MINOR=36
export GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null || { echo "helm.sh: Go 1.26+ is needed to build Helm" >&2; exit 1; }
cache_root="${RAYSCALE_CACHE:-$HOME/.cache/rayscale}"
dir="${cache_root}/helm-${HELM_VERSION}-k8s1.${K8S_MINOR}-$(go env GOVERSION)"
if [[ ! -x "$dir/helm" ]]; then
  mkdir -p "$cache_root"
  # One build at a time per cache root (parallel test sessions, `make builds`); the binary is
  # built beside its place and renamed into it, so nobody runs half a file.
  exec 9>"${cache_root}/.helm.lock"
  flock 9
fi
if [[ ! -x "$dir/helm" ]]; then
  start=$SECONDS
  echo "helm.sh: building Helm ${HELM_VERSION} (first run only) ..." >&2
  tmp="$(mktemp -d "${cache_root}/helm.tmp.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} \
      -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${K8S_MINOR} \
      -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${K8S_MINOR}" \
    "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
  mkdir -p "$dir"
  mv "$tmp/helm" "$dir/helm"
  echo "helm.sh: built in $((SECONDS - start))s" >&2
fi
echo "$dir/helm"
