# Sourced by build.sh and build-operator.sh: the pinned version, Go's environment, the
# check that go.mod matches versions.env, and the cache root. Runs in this directory.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
source ./versions.env
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
module=github.com/ray-project/kuberay/ray-operator
cache_root="${RAYSCALE_CACHE:-$HOME/.cache/rayscale}"

required="$(awk -v m="$module" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' go.mod)"
if [[ "$required" != "$KUBERAY_VERSION" ]] || ! grep -qx "tool ${module}" go.mod; then
  echo "$(basename "$0"): go.mod must require ${module} ${KUBERAY_VERSION} (versions.env says so; it requires ${required:-nothing}) and list it as a tool; run ${here}/update-gomod.sh" >&2
  exit 1
fi
