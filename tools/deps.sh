#!/bin/sh
# Installs what graft's build and tests need on a fresh Debian machine:
# the Debian packages below (only those missing) and the Python virtual
# environment .venv with the pinned test oracles of tools/requirements.txt.
# Idempotent; called by `make` through the deps stamp.
set -eu
cd "$(dirname "$0")/.."

PKGS="gcc make pkg-config protobuf-c-compiler libprotobuf-c-dev libcriterion-dev
zlib1g-dev libjansson-dev libpcre2-dev libutf8proc-dev strace time python3 python3-venv"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "deps: installing Debian packages:$missing"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
    # shellcheck disable=SC2086
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
fi

VENV=.venv
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
    echo "deps: creating $VENV"
    "$PY" -m venv "$VENV"
fi
if ! cmp -s tools/requirements.txt "$VENV/.requirements"; then
    echo "deps: installing Python test oracles into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r tools/requirements.txt
    cp tools/requirements.txt "$VENV/.requirements"
fi
