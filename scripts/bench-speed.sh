#!/usr/bin/env bash
# The speed table at the top of BENCHMARKS.md (docs/performance.md): on
# this machine only (every request goes to 127.0.0.1), in one run, with
# the baselines of the same run:
#
#   1. baselines: print(1) in a plain chroot and in a bare `runsc run`;
#   2. a warm start: airlockd started on an empty state directory, the
#      time to /readyz and to /readyz?warm=true, then one-shot print(1)
#      paced at RATE from the first request on (pool misses counted);
#   3. the comparable benchmark: N sandboxes one after another, each
#      created, given one command, timed from the create to the result,
#      destroyed (as the independent benchmark of the peers does): a
#      session with `echo hi` (exec), a session with a Python cell
#      print(1) (cell), and POST /v1/execute (oneshot);
#   5. host CPU per run: print(1) 4 at once for SUSTAIN against a bare
#      `runsc run` 4 at once, CPU per run from the sandboxes' cgroups and
#      airlockd's own (with the runsc commands it waited for), and a CPU
#      profile of airlockd over 30 s of it (go tool pprof -top);
#   4. the E2B SDK: Sandbox.create() to the first runCode('print(1)')
#      result, E2B_N sandboxes, with the published SDK, when E2BSDK names
#      a directory holding e2e/e2bsdk with its node_modules (npm ci).
#   Series 3 and 4 run back to back, then again at a moderate pace, one
#   sandbox every 1/PACE s (the pace of the speed targets: about a
#   quarter of what the node sustains), so each create finds the pool
#   replenished rather than competing with the last one's replacement.
#
# With BEFORE_BIN=<dir holding airlockd of an earlier build>, series 3
# and 4 run against it as well, at the same time: both airlockd run side
# by side (each on its own state directory, the images shared) and the
# load tools alternate between them sandbox by sandbox, so that both see
# the same load.
# ONLY=comparable runs series 3 and 4 alone, ONLY=cpu series 5 alone,
# ONLY=warm series 1 and 2.
# KEEP_LOGS=<dir> keeps airlockd's logs there. Needs root and what
# scripts/setup.sh builds.
#
#   sudo scripts/bench-speed.sh
#   N=100 E2B_N=30 RATE=1 E2BSDK=/tmp/e2bsdk BEFORE_BIN=/tmp/old/bin sudo -E scripts/bench-speed.sh
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${AIRLOCK_BIN:-$REPO/bin}"
STATE="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
N="${N:-100}"         # sandboxes per comparable series
E2B_N="${E2B_N:-30}"  # sandboxes of the E2B SDK series
RATE="${RATE:-1}"     # one-shot runs a second after a start
WARMN="${WARMN:-60}"  # one-shot runs after a start
PORT="${PORT:-18082}"
SUSTAIN="${SUSTAIN:-60s}" # the CPU series; empty skips it
PACE="${PACE-0.5}"    # sandboxes a second of the paced series; empty skips them
DEBUG_PORT="${DEBUG_PORT:-18083}"
E2BSDK="${E2BSDK:-}"
PARENT="airlock-bench-$$"
WORKS=()
PID=""
PIDS=()

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
	if [ -n "${KEEP_LOGS:-}" ]; then # a directory: airlockd's logs are copied there
		mkdir -p "$KEEP_LOGS"
		for w in "${WORKS[@]}"; do [ -f "$w/airlockd.log" ] && cp "$w/airlockd.log" "$KEEP_LOGS/$(basename "$w").log"; done
	fi
	for w in "${WORKS[@]}"; do
		for m in $(awk -v w="$w" '$5 ~ "^"w {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" || true; done
		rm -rf "$w"
	done
	for c in /sys/fs/cgroup/*/"$PARENT" /sys/fs/cgroup/"$PARENT"; do [ -d "$c" ] && rmdir "$c" 2>/dev/null || true; done
}
trap cleanup EXIT

if ss -ltn "sport = :$PORT" | grep -q LISTEN; then
	echo "port $PORT is in use; set PORT to a free one" >&2
	exit 1
fi

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
start() { # airlockd-binary port flags...: on a fresh state directory
	local bin="$1" port="$2"; shift 2
	WORK="$(mktemp -d /tmp/airlock-bench-XXXXXX)"
	WORKS+=("$WORK")
	ln -s "$STATE/images" "$WORK/images"
	T0=$(date +%s%N)
	"$bin" --listen "127.0.0.1:$port" --state-dir "$WORK" --agent "$BIN/airlock-agent" \
		--cgroup-parent "$PARENT" --keep-sessions=false "$@" >>"$WORK/airlockd.log" 2>&1 &
	PID=$!
	PIDS+=("$PID")
	for _ in $(seq 1200); do
		curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
		sleep 0.05
	done
	READY_MS=$(ms "$T0")
	export AIRLOCK_URL="http://127.0.0.1:$port" AIRLOCK_API_KEY="$(cat "$WORK/default.key")"
	E2B_KEY="$("$BIN/airlock" keys create --format e2b --name bench-speed 2>/dev/null)"
}
waitwarm() {
	for _ in $(seq 3600); do
		curl -sf "$AIRLOCK_URL/readyz?warm=true" >/dev/null && break
		sleep 0.05
	done
	WARM_MS=$(ms "$T0")
}
stop() { kill "$PID"; wait "$PID" || true; PID=""; }
acct() { # cgroup name: its CPU nanoseconds so far (cgroup v1 cpuacct or v2)
	if [ -f "/sys/fs/cgroup/cpuacct/$1/cpuacct.usage" ]; then cat "/sys/fs/cgroup/cpuacct/$1/cpuacct.usage"
	elif [ -f "/sys/fs/cgroup/$1/cpu.stat" ]; then awk '/usage_usec/ {print $2 * 1000}' "/sys/fs/cgroup/$1/cpu.stat"
	else echo 0; fi
}
proccpu() { # pid: its own CPU in ns. Not its waited-for children's: airlockd
	# is the sandboxes' subreaper, so that would count every sandbox a
	# second time beside its cgroup. The runsc commands it runs are left
	# out here; scripts/cpu-account.sh accounts for everything.
	awk -v hz="$(getconf CLK_TCK)" '{s = $0; sub(/.*\) /, "", s); split(s, f, " "); printf "%.0f\n", (f[12] + f[13]) * 1000000000 / hz}' "/proc/$1/stat"
}
metric_sum() { curl -s "$AIRLOCK_URL/metrics" | awk -v m="$1" 'index($0, m) == 1 {v += $2} END {print v + 0}'; }
title() { printf '\n### %s\n' "$*"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

comparable() { # label: AIRLOCK_TARGETS and E2B_TARGETS name the servers
	title "$1: create to first result, $N sandboxes one after another (load $(load))"
	"$REPO/scripts/bench-create.py" exec "$N" | sed 's/^/    /'
	"$REPO/scripts/bench-create.py" cell "$N" | sed 's/^/    /'
	"$REPO/scripts/bench-create.py" oneshot "$N" | sed 's/^/    /'
	if [ -n "$PACE" ]; then
		echo "    at a moderate pace: one sandbox every $(python3 -c "print(round(1/$PACE, 2))") s"
		"$REPO/scripts/bench-create.py" --rate "$PACE" exec "$N" | sed 's/^/    paced, /'
		"$REPO/scripts/bench-create.py" --rate "$PACE" cell "$N" | sed 's/^/    paced, /'
	fi
	if [ -n "$E2BSDK" ] && [ -d "$E2BSDK/node_modules/@e2b/code-interpreter" ]; then
		cp "$REPO/e2e/e2bsdk/bench-ab.mjs" "$E2BSDK/bench-ab.mjs" # resolves the SDK from there
		(cd "$E2BSDK" && node bench-ab.mjs "$E2B_N") | sed 's/^/    E2B SDK, /'
		[ -z "$PACE" ] || (cd "$E2BSDK" && node bench-ab.mjs "$E2B_N" "$PACE") | sed 's/^/    paced, E2B SDK, /'
	fi
	echo "    load average after: $(load)"
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "load average before: $(load)"

if [ -z "${ONLY:-}" ] || [ "$ONLY" = warm ]; then
title "baselines: print(1), 20 runs each (load $(load))"
"$BIN/airlock" node baseline --kind chroot --state-dir "$STATE" --requests 20 | sed 's/^/    chroot: /'
"$BIN/airlock" node baseline --kind runsc --state-dir "$STATE" --requests 20 | sed 's/^/    runsc: /'

title "a warm start: airlockd started on an empty state directory (load $(load))"
start "$BIN/airlockd" "$PORT"
echo "    /readyz 200 after ${READY_MS} ms"
waitwarm
echo "    /readyz?warm=true 200 after ${WARM_MS} ms"
m0=$(metric_sum 'airlock_pool_misses_total')
"$BIN/airlock" node bench --rate "$RATE" --requests "$WARMN" --concurrency 4 --duration 10m | sed 's/^/    /'
echo "    pool misses over those $WARMN runs: $(( $(metric_sum 'airlock_pool_misses_total') - m0 ))"
stop
fi # ONLY

if [ -z "${ONLY:-}" ] || [ "$ONLY" = comparable ]; then
start "$BIN/airlockd" "$PORT"
waitwarm
export AIRLOCK_TARGETS="after=$AIRLOCK_URL=$AIRLOCK_API_KEY" E2B_TARGETS="after=$AIRLOCK_URL=$E2B_KEY"
AFTER_URL="$AIRLOCK_URL"
label="after"
if [ -n "${BEFORE_BIN:-}" ]; then
	start "$BEFORE_BIN/airlockd" "$((PORT + 2))"
	# Its pool fills as it would: wait for the sessions' first member.
	for _ in $(seq 1200); do
		[ "$(metric_sum 'airlock_pool_size{image="python-ds",language="agent"}')" -ge 1 ] 2>/dev/null && break
		sleep 0.25
	done
	AIRLOCK_TARGETS="before=$AIRLOCK_URL=$AIRLOCK_API_KEY,$AIRLOCK_TARGETS"
	E2B_TARGETS="before=$AIRLOCK_URL=$E2B_KEY,$E2B_TARGETS"
	label="before ($BEFORE_BIN) and after, taking turns"
fi
comparable "$label"
AIRLOCK_URL="$AFTER_URL"
echo "    ready contexts taken (after): $(metric_sum 'airlock_ready_contexts_taken_total')"
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
PIDS=()
fi # ONLY

if [ -n "$SUSTAIN" ] && { [ -z "${ONLY:-}" ] || [ "$ONLY" = cpu ]; }; then
	title "host CPU per run: print(1), 4 at once, $SUSTAIN (load $(load))"
	mkdir -p "/sys/fs/cgroup/cpuacct/$PARENT-bare" 2>/dev/null || true
	BARE="$(mktemp -d /tmp/airlock-bench-XXXXXX)"
	WORKS+=("$BARE")
	c0=$(acct "$PARENT-bare")
	"$BIN/airlock" node baseline --kind runsc --state-dir "$STATE" --concurrency 4 --duration "$SUSTAIN" \
		--cgroup-parent "$PARENT-bare" -o json >"$BARE/bare.json"
	c1=$(acct "$PARENT-bare")
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n=d.get("ok", d.get("requests")); print("    bare runsc: %s runs, %.0f/min, %.3f CPU-s per run (its cgroup)" % (n, d.get("throughput_per_min", 0), int(sys.argv[2])/1e9/max(1, n)))' "$BARE/bare.json" "$((c1 - c0))" || cat "$BARE/bare.json"
	rmdir "/sys/fs/cgroup/cpuacct/$PARENT-bare" 2>/dev/null || true
	start "$BIN/airlockd" "$PORT" --debug-listen "127.0.0.1:$DEBUG_PORT"
	waitwarm
	s0=$(acct "$PARENT"); d0=$(proccpu "$PID")
	curl -s -o "$WORK/cpu.pprof" "http://127.0.0.1:$DEBUG_PORT/debug/pprof/profile?seconds=30" &
	PROF=$!
	"$BIN/airlock" node bench --concurrency 4 --duration "$SUSTAIN" -o json >"$WORK/sustain.json"
	s1=$(acct "$PARENT"); d1=$(proccpu "$PID")
	wait "$PROF" || true
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n=d.get("ok", d.get("requests")); s=int(sys.argv[2])/1e9; a=int(float(sys.argv[3]))/1e9; print("    airlockd: %s runs, %.0f/min; CPU-s per run: sandboxes %.3f (their cgroups), airlockd itself %.3f, its runsc commands not counted (scripts/cpu-account.sh)" % (n, d.get("throughput_per_min", 0), s/max(1,n), a/max(1,n)))' "$WORK/sustain.json" "$((s1 - s0))" "$((d1 - d0))" || cat "$WORK/sustain.json"
	echo "    airlockd's CPU profile over 30 s of it, by function (cumulative):"
	(cd "$REPO" && go tool pprof -top -cum -nodecount 40 "$BIN/airlockd" "$WORK/cpu.pprof" 2>/dev/null) | sed 's/^/      /'
	stop
fi
