#!/bin/sh
# run-pytest.sh PYTHON PKGDIR TEST.py - run one pytest file against the
# torch_openreg package of the build tree (PKGDIR holds torch_openreg/).
# Nothing is written to the source tree: no bytecode, no pytest cache.
set -eu
python=$1 pkgdir=$2 test=$3
PYTHONPATH=$pkgdir${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
exec "$python" -m pytest -p no:cacheprovider -q -ra "$test"
