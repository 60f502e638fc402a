# Sourced by the build scripts of the Go programs of other projects that tests run beside rayscale
# (hack/kueue/build.sh, hack/gang/build.sh): Go's environment, the check that go.mod requires the
# pinned version, the cache root, and the steps around a build into the cache. The caller sets
# `bindir` and defines `complete` (whether $bindir holds a whole build) before build_begin.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
cache_root="${RAYSCALE_CACHE:-$HOME/.cache/rayscale}"

# check_gomod MODULE VERSION TOOL: stop with what to do unless go.mod requires MODULE at VERSION
# and lists TOOL (the package built) as a tool.
check_gomod() {
  local required
  required="$(awk -v m="$1" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' go.mod)"
  if [[ "$required" != "$2" ]] || ! grep -qx "tool $3" go.mod; then
    echo "$(basename "$0"): go.mod must require $1 $2 (versions.env says so; it requires ${required:-nothing}) and list $3 as a tool; run $(pwd)/update-gomod.sh" >&2
    exit 1
  fi
}

# build_key FILE...: a short hash of the files, this one and the Go version (the cache entry's name).
build_key() {
  (cat "$@" "${BASH_SOURCE[0]}"; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-12
}

# Prints $bindir and exits when `complete` says it is built; else waits for the lock $1 (one build
# at a time per cache root: parallel test sessions, make targets), checks again, and makes an
# empty $tmp to build into (removed if the build fails).
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

# module_dir MODULE: its directory in the Go module cache.
module_dir() {
  go list -m -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}

# $tmp (made writable: what was copied from the read-only module cache) becomes $bindir, printed.
build_done() {
  chmod -R u+w "$tmp"
  rm -rf "$bindir"
  mv "$tmp" "$bindir"
  trap - EXIT
  echo "$bindir"
}
