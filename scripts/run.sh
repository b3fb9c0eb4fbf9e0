#!/usr/bin/env bash
# Sets up what airlockd needs (see setup.sh: nothing that only the tests
# use) and starts it on its embedded defaults: SQLite, local directories,
# gVisor. Must run as root. Only the base image is built before the
# start: airlockd builds python-ds in the background while it serves
# (--build-images), and runs Python that needs nothing of python-ds on
# base until then.
#
#   scripts/run.sh [--microvm] [AIRLOCKD-FLAGS...]
#
# --microvm (or AIRLOCK_MICROVM=1) also sets up the microVM tier (QEMU,
# the guest kernel, the images' guest artefacts) and starts airlockd with
# the microVM backend. Every other argument goes to airlockd.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
setup=(--images=base)
args=()
for arg in "$@"; do
	case "$arg" in
	--microvm | --microvm=true) setup+=(--microvm); args+=("$arg") ;;
	*) args+=("$arg") ;;
	esac
done
"$REPO/scripts/setup.sh" "${setup[@]}"
export AIRLOCK_STATE_DIR="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
export AIRLOCK_LISTEN="${AIRLOCK_LISTEN:-127.0.0.1:8080}"
# setup.sh installs runsc into $AIRLOCK_PREFIX/bin; airlockd looks it up
# on PATH.
export PATH="${AIRLOCK_PREFIX:-/usr/local}/bin:$PATH"
printf '\n==> starting airlockd on %s (state in %s)\n' "$AIRLOCK_LISTEN" "$AIRLOCK_STATE_DIR"
exec "$REPO/bin/airlockd" "${args[@]}"
