#!/usr/bin/env bash
# Builds rayscale's wheel from a source tree, as the operator image does: the Dockerfile's first stage
# runs this script, and tests/integration/test_install_paths.py runs it on a clean copy of the
# repository (no image can be built there), so the two cannot drift.
#
#   hack/image/build-wheel.sh SRC OUTDIR
#
# `python -m build`: the sdist of SRC, then the wheel from that sdist, with pyproject.toml's
# [build-system] requires; setup.py generates the Ray GCS bindings into the wheel (of the source
# tree, setuptools writes only operator/rayscale.egg-info). $PYTHON (default python3) makes the
# throwaway virtualenv they run in. Leaves OUTDIR/rayscale-*.tar.gz and OUTDIR/rayscale-*.whl.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 SRC OUTDIR" >&2; exit 2; }
src=$1
out=$2
python=${PYTHON:-python3}
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT

"$python" -m venv "$tools/venv"
# `build` and pyproject.toml's [build-system] requires, in one environment both builds share
# (`build` checks that it holds them): quicker than an isolated environment for each.
"$tools/venv/bin/python" - "$src/pyproject.toml" >"$tools/requires.txt" <<'PY'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["build-system"]["requires"]))
PY
"$tools/venv/bin/python" -m pip install --quiet build==1.2.2.post1 -r "$tools/requires.txt"
"$tools/venv/bin/python" -m build --no-isolation --outdir "$out" "$src"

# A wheel without the bindings installs, then `rayscale run` fails at import: fail here instead.
"$tools/venv/bin/python" - "$out" <<'PY'
import sys
import zipfile
from pathlib import Path

(wheel,) = Path(sys.argv[1]).glob("rayscale-*.whl")
names = set(zipfile.ZipFile(wheel).namelist())
missing = [m for m in ("autoscaler", "common", "gcs", "gcs_service", "node_manager")
           if f"rayscale/ray/protos/{m}_pb2.py" not in names]
if missing:
    sys.exit(f"{wheel.name} lacks the generated bindings of {missing}")
print(f"built {wheel.name}")
PY
