# Sourced by build.sh and build-operator.sh: the pinned version, Go's environment, the
# check that go.mod matches versions.env, the cache root, and the steps around a build into
# the cache (build_begin, build_done, module_dir: hack/gobuild.sh). Runs in this directory.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
source ./versions.env
source ../../hack/gobuild.sh  # Go's environment, the cache root, build_begin, build_done, module_dir
module=github.com/ray-project/kuberay/ray-operator
# The oracle's and the operator's builds, with the same flags so the operator's reuses the
# packages the oracle's compiled. -dwarf=false: no debug information compiled (-w drops it at
# the link anyway), a sixth less compile time.
go_build=(go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w")

check_gomod "$module" "$KUBERAY_VERSION" "$module"
