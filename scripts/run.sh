#!/usr/bin/env bash
# Sets Airlock up (see setup.sh) and starts airlockd on its embedded
# defaults: SQLite, local directories, gVisor. Must run as root.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$REPO/scripts/setup.sh"
export AIRLOCK_STATE_DIR="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
export AIRLOCK_LISTEN="${AIRLOCK_LISTEN:-127.0.0.1:8080}"
printf '\n==> starting airlockd on %s (state in %s)\n' "$AIRLOCK_LISTEN" "$AIRLOCK_STATE_DIR"
exec "$REPO/bin/airlockd" "$@"
