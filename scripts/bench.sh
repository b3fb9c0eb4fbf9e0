#!/usr/bin/env bash
# Runs the execution benchmarks of BENCHMARKS.md in one go, on this
# machine only (every request goes to 127.0.0.1), and prints the figures:
# the floor (chroot), a bare `runsc run`, and airlockd cold, restoring on
# demand and with the warm pool; sustained throughput with a CPU split;
# memory per idle pool member. Needs root and what scripts/setup.sh builds.
#
#   sudo scripts/bench.sh                 # everything (about 12 minutes)
#   N=50 SUSTAIN=60s sudo scripts/bench.sh  # shorter
#   ONLY=sustain SUSTAIN=60s sudo scripts/bench.sh  # the sustained run alone
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$REPO/bin"
STATE="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
N="${N:-100}"            # requests per print(1) series
NCHART="${NCHART:-30}"   # requests per chart series
SUSTAIN="${SUSTAIN:-5m}" # sustained-throughput run
PORT="${PORT:-18080}"
PARENT="airlock-bench-$$"
WORK="$(mktemp -d /tmp/airlock-bench-XXXXXX)"
ln -s "$STATE/images" "$WORK/images"
CHART=$'import matplotlib.pyplot as plt\nplt.figure(figsize=(6,3))\nplt.plot([1,2,3,4],[10,25,18,35],color=\'#3b82f6\')\nplt.title(\'Agent Performance\')\nplt.savefig(\'output.png\')'
PID=""

cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
	for m in $(awk -v w="$WORK" '$5 ~ "^"w {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" || true; done
	for c in /sys/fs/cgroup/*/"$PARENT" /sys/fs/cgroup/"$PARENT"; do [ -d "$c" ] && rmdir "$c" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

start() { # flags...
	"$BIN/airlockd" --listen "127.0.0.1:$PORT" --state-dir "$WORK" --agent "$BIN/airlock-agent" \
		--cgroup-parent "$PARENT" --log-level warn --debug-listen 127.0.0.1:16060 "$@" >>"$WORK/airlockd.log" 2>&1 &
	PID=$!
	for _ in $(seq 300); do
		curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break
		sleep 0.1
	done
	export AIRLOCK_URL="http://127.0.0.1:$PORT" AIRLOCK_API_KEY="$(cat "$WORK/default.key")"
}
stop() { kill "$PID"; wait "$PID" || true; PID=""; }
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" 'index($0, m) == 1 && v == "" {v = $2} END {print v}'; }
waitmetric() { # name minimum
	for _ in $(seq 600); do
		v="$(metric "$1")"
		[ -n "$v" ] && awk -v v="$v" -v m="$2" 'BEGIN{exit !(v >= m)}' && return 0
		sleep 0.5
	done
	echo "timed out waiting for $1 >= $2" >&2
	return 1
}
title() { printf '\n### %s\n' "$*"; }
bench() { "$BIN/airlock" bench "$@" | sed 's/^/    /'; }
baseline() { "$BIN/airlock" baseline --state-dir "$STATE" "$@" | sed 's/^/    /'; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "runsc: $(sha256sum "$(command -v runsc)" | cut -c1-12) (sha256 of the binary)"

if [ "${ONLY:-}" != sustain ]; then # ONLY=sustain runs the last section alone

title "floor: chroot IMAGE python3 (no isolation)"
baseline --kind chroot --code 'print(1)' --requests "$N"
baseline --kind chroot --code "$CHART" --requests "$NCHART"

title "bare runsc run of the same image"
baseline --kind runsc --code 'print(1)' --requests "$N"
baseline --kind runsc --code "$CHART" --requests "$NCHART"

title "airlockd, cold: no snapshots, no pool (every sandbox boots)"
start --no-snapshots --pool-max 0 --warm ""
bench --code 'print(1)' --concurrency 1 --requests "$N" --duration 30m --warmup 3
bench --code "$CHART" --concurrency 1 --requests "$NCHART" --duration 30m --warmup 1
stop

title "airlockd, restore on demand (pool miss): base snapshots, no pool"
start --pool-max 0
waitmetric 'airlock_snapshot_builds_total{result="built"}' 4
bench --code 'print(1)' --concurrency 1 --requests "$N" --duration 30m --warmup 3
bench --code "$CHART" --concurrency 1 --requests "$NCHART" --duration 30m --warmup 1
stop

title "airlockd, warm pool (defaults): paced at 2 requests/s, then back to back"
start
waitmetric 'airlock_pool_size{image="python-ds",language="python"}' 1
sleep 5
bench --code 'print(1)' --concurrency 1 --requests "$N" --duration 30m --rate 2
bench --code "$CHART" --concurrency 1 --requests "$NCHART" --duration 30m --rate 1
bench --code 'print(1)' --concurrency 1 --requests "$N" --duration 30m

title "memory per idle pool member (after 20 s idle)"
sleep 20
members=0; rss=0
for cg in /sys/fs/cgroup/memory/"$PARENT"/pool-* /sys/fs/cgroup/"$PARENT"/pool-*; do
	[ -f "$cg/cgroup.procs" ] || continue
	members=$((members + 1))
	for p in $(cat "$cg/cgroup.procs"); do
		r=$(awk '/VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
		rss=$((rss + ${r:-0}))
	done
done
echo "    $members members, RSS of their runsc processes: $((rss / 1024)) MiB in all, $(( members > 0 ? rss / 1024 / members : 0 )) MiB each"
echo "    cgroup memory of all members (airlock_pool_memory_bytes): $(metric airlock_pool_memory_bytes | awk '{printf "%.0f MiB", $1/1048576}')"

fi # ONLY

if [ -z "$PID" ]; then
	start
	waitmetric 'airlock_pool_size{image="python-ds",language="python"}' 1
fi
title "sustained print(1), concurrency 4, $SUSTAIN, warm pool"
cpuacct() { # nanoseconds of CPU used by every sandbox under the parent
	if [ -f "/sys/fs/cgroup/cpuacct/$PARENT/cpuacct.usage" ]; then cat "/sys/fs/cgroup/cpuacct/$PARENT/cpuacct.usage"
	else awk '/usage_usec/ {print $2 * 1000}' "/sys/fs/cgroup/$PARENT/cpu.stat"; fi
}
proccpu() { awk '{printf "%.0f\n", ($14 + $15) * 1e7}' "/proc/$PID/stat"; } # airlockd's own CPU, ns (100 Hz ticks)
busy() { awk '/^cpu / {printf "%.0f\n", ($2 + $3 + $4 + $7 + $8 + $9) * 1e7}' /proc/stat; } # the whole machine, ns
s0=$(cpuacct); a0=$(proccpu); m0=$(busy); t0=$(date +%s%N)
curl -s -o "$WORK/cpu.prof" "http://127.0.0.1:16060/debug/pprof/profile?seconds=30" 2>/dev/null &
PROF=$!
bench --code 'print(1)' --concurrency 4 --duration "$SUSTAIN"
s1=$(cpuacct); a1=$(proccpu); m1=$(busy); t1=$(date +%s%N)
awk -v s0="$s0" -v s1="$s1" -v a0="$a0" -v a1="$a1" -v m0="$m0" -v m1="$m1" -v t0="$t0" -v t1="$t1" -v n="$(nproc)" 'BEGIN {
	s = s1 - s0; a = a1 - a0; m = m1 - m0; w = (t1 - t0) * n
	printf "    CPU over the run: the machine was busy %.0f%% of %.0f core-seconds\n", 100*m/w, w/1e9
	printf "      sandboxes (gVisor kernel and gofer, their cgroups): %.0f%%\n", 100*s/w
	printf "      airlockd itself: %.0f%%\n", 100*a/w
	printf "      the rest (runsc command-line processes, the host kernel, anything else running): %.0f%%\n", 100*(m-s-a)/w
}'
wait "$PROF" || true
echo "    airlockd CPU profile (30 s of the run), top functions:"
go tool pprof -top -nodecount=12 "$BIN/airlockd" "$WORK/cpu.prof" 2>/dev/null | sed -n '4,20p' | sed 's/^/      /'
stop
