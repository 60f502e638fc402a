# Sourced by build.sh and build-operator.sh: the pinned version, Go's environment, the
# check that go.mod matches versions.env, the cache root, and the steps around a build into
# the cache (build_begin, build_done, module_dir). Runs in this directory.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
source ./versions.env
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
module=github.com/ray-project/kuberay/ray-operator
# The oracle's and the operator's builds, with the same flags so the operator's reuses the
# packages the oracle's compiled. -dwarf=false: no debug information compiled (-w drops it at
# the link anyway), a sixth less compile time.
go_build=(go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w")
cache_root="${RAYSCALE_CACHE:-$HOME/.cache/rayscale}"

required="$(awk -v m="$module" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' go.mod)"
if [[ "$required" != "$KUBERAY_VERSION" ]] || ! grep -qx "tool ${module}" go.mod; then
  echo "$(basename "$0"): go.mod must require ${module} ${KUBERAY_VERSION} (versions.env says so; it requires ${required:-nothing}) and list it as a tool; run ${here}/update-gomod.sh" >&2
  exit 1
fi

# Prints $bindir and exits when the sourcing script's `complete` says it is built; else waits for
# the lock $1 (one build at a time per cache root: parallel test sessions, make targets), checks
# again, and makes an empty $tmp to build into (removed if the build fails).
build_begin() {
  if complete; then echo "$bindir"; exit 0; fi
  mkdir -p "$cache_root"
  exec 9>"${cache_root}/$1"
  flock 9
  if complete; then echo "$bindir"; exit 0; fi
  tmp="${bindir}.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  trap 'rm -rf "$tmp"' EXIT
}

# $tmp becomes $bindir, which is printed.
build_done() {
  rm -rf "$bindir"
  mv "$tmp" "$bindir"
  trap - EXIT
  echo "$bindir"
}

# The directory of KubeRay's module in the Go module cache.
module_dir() {
  go list -m -json "$module" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}
