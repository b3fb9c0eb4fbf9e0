#!/usr/bin/env bash
# Runs every test: sets up what they need (see setup.sh), checks vet and
# gofmt, then the whole suite once, with the race detector, against real
# runsc, SQLite, PostgreSQL (throwaway servers the tests start), HTTP and
# images. Must run as root.
#
# AIRLOCK_TEST_REQUIRE=1 (the default here; CI runs this script) makes a
# test that lacks something of the machine (root, runsc, the images, the
# agent, a tool) fail instead of skip, so the suite cannot pass by
# skipping. Run with AIRLOCK_TEST_REQUIRE=0 to see skips instead.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# Go unpacked into /usr/local/go but not on PATH (setup.sh says what to do
# when there is no Go at all).
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi

# Every step prints how long it took, and the end a summary (also when a
# step fails), so the CI log shows where the time goes.
t0=$SECONDS
times=()
step_name=""
step_start=0
step_cpu=""
# cpu_ticks prints the machine's busy and total CPU ticks so far
# (/proc/stat), so each step can say how busy it kept the cores: a step
# that leaves them idle is one whose time can be overlapped.
cpu_ticks() {
	awk '/^cpu / {busy = $2 + $3 + $4 + $7 + $8; print busy, busy + $5 + $6; exit}' /proc/stat
}
step() {
	end_step
	step_name="$1"
	step_start=$SECONDS
	step_cpu="$(cpu_ticks)"
	printf '\n==> %s\n' "$step_name"
}
end_step() {
	if [ -n "$step_name" ]; then
		local took=$((SECONDS - step_start)) busy
		busy="$(cpu_ticks | awk -v b0="${step_cpu% *}" -v t0="${step_cpu#* }" '{d = $2 - t0; printf "%d", (d > 0 ? 100 * ($1 - b0) / d : 0)}')"
		printf '==> %s: %d s, CPU %d%% busy\n' "$step_name" "$took" "$busy"
		times+=("$(printf '%5d s  %3d%% CPU  %s' "$took" "$busy" "$step_name")")
		step_name=""
	fi
}
summary() {
	local rc=$?
	end_step
	printf '\n==> times\n'
	printf '%s\n' "${times[@]}"
	printf '%5d s  total (exit %d)\n' "$((SECONDS - t0))" "$rc"
}
trap summary EXIT

step "setup (scripts/setup.sh --microvm --tests)"
# What the service needs, the microVM tier (its conformance suite runs
# here) and what only the tests use (PostgreSQL, Chromium, Node, versitygw).
"$REPO/scripts/setup.sh" --microvm --tests
export PATH="${AIRLOCK_PREFIX:-/usr/local}/bin:$PATH"

export AIRLOCK_STATE_DIR="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
# Integration tests use the images built above (found through
# AIRLOCK_STATE_DIR) and make their own state.
export AIRLOCK_TEST_AGENT="$REPO/bin/airlock-agent"
export AIRLOCK_TEST_REQUIRE="${AIRLOCK_TEST_REQUIRE:-1}"
# What tests leave to look at afterwards (the console's screenshots).
export AIRLOCK_TEST_OUTPUT="${AIRLOCK_TEST_OUTPUT:-/tmp/airlock-test-output}"

step "go vet"
# With -race and cgo, as the tests build: vet then types its packages
# against the dependencies setup.sh's race build compiled (its time on a
# fresh machine was mostly compiling them again without -race). The race
# build tag picks internal/secretscan's race_test.go over norace_test.go,
# its one file that differs.
CGO_ENABLED=1 go vet -race ./...

step "gofmt"
bad="$(gofmt -l $(git ls-files '*.go'))"
if [ -n "$bad" ]; then
	echo "gofmt would change:"; echo "$bad"; exit 1
fi

# One run of every package with the race detector: it costs about a fifth
# more time than a run without (measured on the 2-core development
# machines), well within what CI allows, so the suite does not run twice.
# -race needs cgo (setup.sh installs gcc, with which it builds
# bin/airlockd, for the guard's Python grammar, and bin/airlock);
# bin/airlock-agent stays static.
step "go test -race ./..."
echo "AIRLOCK_TEST_REQUIRE=$AIRLOCK_TEST_REQUIRE; integration tests run real runsc (several minutes); log in /tmp/airlock-test.log, events in /tmp/airlock-test.json; screenshots in $AIRLOCK_TEST_OUTPUT"
# go test -json, shown as a plain go test shows it (package lines and the
# output of failing tests), then the slowest packages and tests
# (internal/tools/testreport), so the next growth is visible.
go build -o /tmp/airlock-testreport ./internal/tools/testreport
# The longest packages are named first: go test builds and runs packages
# in the order they are listed (two at a time on two cores), and e2e alone
# takes about a third of the suite, so it must not be the last to start.
longest=(./e2e ./service/session ./backend/microvm ./internal/release ./backend/gvisor ./service/abuse ./service/provision ./fleet ./service/quota)
# -ldflags=-w: the test binaries are linked without DWARF (a third less
# link time each, about 80 links on a fresh machine); stack traces and
# the race detector's reports name functions and lines from the binary's
# own tables, which stay.
CGO_ENABLED=1 go test -json -race -ldflags=-w -count=1 -timeout 60m "${longest[@]}" ./... 2>&1 |
	/tmp/airlock-testreport -top 25 -json /tmp/airlock-test.json | tee /tmp/airlock-test.log
