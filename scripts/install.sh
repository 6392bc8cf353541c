#!/bin/sh
# The one install step of Riverlog, shared by `make deps` (and so by CI) and by the Dockerfile, so
# the image is built the way the tests were installed: a virtualenv at VENV with the project
# installed editable (the code stays where it was checked out or copied, which both the image and
# a developer's tree rely on), plus the optional-dependency groups in EXTRAS (comma-separated).
#
# Usage: scripts/install.sh VENV [EXTRAS]        PYTHON picks the interpreter (default python3)
set -eu
venv=${1:?usage: scripts/install.sh VENV [EXTRAS]}
extras=${2:-}
case $venv in /*) ;; *) venv=$PWD/$venv ;; esac  # relative to the caller, not the repository
cd "$(dirname "$0")/.."
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet -e ".${extras:+[$extras]}"
