#!/usr/bin/env bash
# Installs the wheel of WHEELDIR with its dependencies into a new virtualenv at PREFIX, as the
# operator image does: the Dockerfile's install stage runs this script (PREFIX /opt/rayscale, copied
# alone into the final image), and tests/integration/test_install_paths.py runs it too.
#
#   hack/image/install.sh WHEELDIR PREFIX
#
# $PYTHON (default python3) makes the virtualenv. pip, setuptools and wheel are removed from it
# afterwards: the image runs rayscale, it installs nothing.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 WHEELDIR PREFIX" >&2; exit 2; }
wheels=$1
prefix=$2
python=${PYTHON:-python3}

"$python" -m venv "$prefix"
"$prefix/bin/python" -m pip install --quiet "$wheels"/rayscale-*.whl
"$prefix/bin/python" -m pip uninstall --quiet --yes pip setuptools wheel
"$prefix/bin/rayscale" version
