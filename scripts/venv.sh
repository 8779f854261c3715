#!/bin/sh
# Create a virtual environment with pip in it, also where Debian/Ubuntu ship Python without
# the python3-venv (ensurepip) package: then make it without pip and bootstrap pip from PyPA.
set -eu
python=$1
venv=$2
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    exit 0
fi
rm -rf "$venv"
if ! "$python" -m venv "$venv" >/dev/null 2>&1; then
    echo "python3-venv is not installed; creating the environment without ensurepip" >&2
    rm -rf "$venv"
    "$python" -m venv --without-pip "$venv"
    "$venv/bin/python" -c "import urllib.request; exec(urllib.request.urlopen('https://bootstrap.pypa.io/get-pip.py').read())" -q
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
