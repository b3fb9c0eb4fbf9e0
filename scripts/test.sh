#!/usr/bin/env bash
# Runs every test: sets up what they need (see setup.sh), checks vet and
# gofmt, then the whole suite against real runsc, SQLite, HTTP and images.
# Must run as root.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$REPO/scripts/setup.sh"
cd "$REPO"
export AIRLOCK_STATE_DIR="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
# Integration tests use the images built above and make their own state.
export AIRLOCK_TEST_IMAGES="$AIRLOCK_STATE_DIR/images"
export AIRLOCK_TEST_AGENT="$REPO/bin/airlock-agent"

printf '\n==> go vet\n'
go vet ./...
printf '\n==> gofmt\n'
bad="$(gofmt -l $(git ls-files '*.go'))"
if [ -n "$bad" ]; then
	echo "gofmt would change:"; echo "$bad"; exit 1
fi
printf '\n==> go test (integration tests run real runsc; about %s)\n' "a few minutes"
go test -count=1 -timeout 60m ./... 2>&1 | tee /tmp/airlock-test.log
