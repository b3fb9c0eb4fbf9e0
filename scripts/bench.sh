#!/usr/bin/env bash
# Runs the execution benchmarks of BENCHMARKS.md in one go, on this
# machine only (every request goes to 127.0.0.1), and prints the table:
# the baselines (host python3, chroot, a bare `runsc run` one at a time
# and several at once) and airlockd paced, on a pool miss, sustained at
# 4 (print) and 2 (chart) at once, under overload, and its saturation
# curve; for each airlockd series the host CPU-seconds per execution.
# Needs root and what scripts/setup.sh builds.
#
#   sudo scripts/bench.sh                      # everything (about 15 minutes)
#   N=20 SUSTAIN=30s STEP=15s sudo scripts/bench.sh   # shorter
#   ONLY=sustain sudo scripts/bench.sh         # the sustained series alone
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${AIRLOCK_BIN:-$REPO/bin}" # AIRLOCK_BIN: another build of the three binaries
STATE="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
N="${N:-40}"              # requests per one-at-a-time series
NCHART="${NCHART:-20}"    # requests per chart series
SUSTAIN="${SUSTAIN:-60s}" # each sustained series
STEP="${STEP:-30s}"       # each step of the saturation curve
PORT="${PORT:-18080}"
PARENT="airlock-bench-$$"
WORK="$(mktemp -d /tmp/airlock-bench-XXXXXX)"
ln -s "$STATE/images" "$WORK/images"
CHART=$'import matplotlib.pyplot as plt\nplt.figure(figsize=(6,3))\nplt.plot([1,2,3,4],[10,25,18,35],color=\'#3b82f6\')\nplt.title(\'Agent Performance\')\nplt.savefig(\'output.png\')'
PID=""

cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
	for m in $(awk -v w="$WORK" '$5 ~ "^"w {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" || true; done
	for c in /sys/fs/cgroup/*/"$PARENT"* /sys/fs/cgroup/"$PARENT"*; do
		[ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "bench.sh: line $LINENO failed (exit $?)" >&2' ERR

if ss -ltn "sport = :$PORT" | grep -q LISTEN; then
	echo "port $PORT is in use; set PORT to a free one" >&2
	exit 1
fi

# Every process of a measured series runs in a cgroup of this run, so its
# CPU is counted whatever else runs on the machine: airlockd and its runsc
# commands in $PARENT-daemon, its sandboxes under $PARENT, each baseline
# with its runsc processes and sandboxes in $PARENT-baseline.
acctdir() { # name: the cpuacct cgroup of this run with that suffix
	if [ -d /sys/fs/cgroup/cpuacct ]; then echo "/sys/fs/cgroup/cpuacct/$PARENT$1"; else echo "/sys/fs/cgroup/$PARENT$1"; fi
}
usage() { # name: CPU nanoseconds of that cgroup so far
	local d; d="$(acctdir "$1")"
	if [ -f "$d/cpuacct.usage" ]; then cat "$d/cpuacct.usage"
	elif [ -f "$d/cpu.stat" ]; then awk '/usage_usec/ {print $2 * 1000}' "$d/cpu.stat"
	else echo 0; fi
}
mkdir -p "$(acctdir -daemon)" "$(acctdir -baseline)"
inacct() { # name command...: run the command in that cgroup
	local d; d="$(acctdir "$1")"; shift
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$d" "$@"
}

start() { # flags... (sh execs airlockd: $! is airlockd)
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$(acctdir -daemon)" "$BIN/airlockd" --listen "127.0.0.1:$PORT" --state-dir "$WORK" --agent "$BIN/airlock-agent" \
		--cgroup-parent "$PARENT" --log-level warn --tenant-share 1 --warm-sessions "" "$@" >>"$WORK/airlockd.log" 2>&1 &
	PID=$!
	for _ in $(seq 300); do
		curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break
		sleep 0.1
	done
	export AIRLOCK_URL="http://127.0.0.1:$PORT" AIRLOCK_API_KEY="$(cat "$WORK/default.key")"
}
stop() { kill "$PID"; wait "$PID" || true; PID=""; }
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" 'index($0, m) == 1 && v == "" {v = $2} END {print v+0}'; }
metricsum() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" 'index($0, m) == 1 {v += $2} END {print v+0}'; }
waitmetric() { # name minimum
	for _ in $(seq 900); do
		v="$(metric "$1")"
		awk -v v="$v" -v m="$2" 'BEGIN{exit !(v >= m)}' && return 0
		sleep 0.5
	done
	echo "timed out waiting for $1 >= $2" >&2
	return 1
}
title() { printf '\n### %s\n' "$*"; }
# baseline ARGS...: airlock baseline, with its CPU-seconds per run (all
# of its processes: runsc commands, sandboxes, gofers).
baseline() {
	local c0 k0 out
	c0=$(usage -baseline); k0=$(kthreads)
	out=$(inacct -baseline "$BIN/airlock" node baseline --state-dir "$STATE" --cgroup-parent "$PARENT-baseline" "$@")
	echo "$out" | sed 's/^/    /'
	echo "$out" | awk -v c0="$c0" -v c1="$(usage -baseline)" -v k0="$k0" -v k1="$(kthreads)" '
		/ runs \(/ {for (i = 1; i <= NF; i++) if ($(i+1) == "runs") n = $i}
		END { k = k1 > k0 ? k1 - k0 : 0; if (n > 0) printf "      CPU per run: %.3f s: runsc, its sandbox and gofer %.3f s, host kernel threads %.3f s\n", (c1 - c0 + k) / n / 1e9, (c1 - c0) / n / 1e9, k / n / 1e9 }'
}

# CPU nanoseconds of the host's kernel threads so far (kworkers, loop
# devices, journalling, ksoftirqd: work the host kernel does for the
# sandboxes' disks and pipes that no cgroup is charged for). A thread
# that exits takes its time with it, so this can only undercount.
kthreads() { cat /proc/[0-9]*/stat 2>/dev/null | sed 's/^.*) //' | awk -v hz="$(getconf CLK_TCK)" '$2 == 2 {s += $12 + $13} END {printf "%.0f\n", s * 1e9 / hz}'; }

# The whole machine's busy time (for context: other engineers' work is in it).
busy() { awk '/^cpu / {printf "%.0f\n", ($2 + $3 + $4 + $7 + $8 + $9) * 1e7}' /proc/stat; }

# bench ARGS...: airlock bench, with the pool misses and the CPU-seconds
# per execution of the series.
bench() {
	local m0 s0 d0 h0 out
	m0=$(busy); s0=$(usage ""); d0=$(usage -daemon); k0=$(kthreads); h0=$(metricsum airlock_pool_misses_total)
	out=$("$BIN/airlock" node bench -o json "$@")
	echo "$out" | awk -v m0="$m0" -v m1="$(busy)" -v s0="$s0" -v s1="$(usage "")" -v d0="$d0" -v d1="$(usage -daemon)" -v k0="$k0" -v k1="$(kthreads)" \
		-v h0="$h0" -v h1="$(metricsum airlock_pool_misses_total)" '
		/"requests"/ {gsub(/[^0-9]/, "", $2); req = $2}
		/"ok"/ {gsub(/[^0-9]/, "", $2); ok = $2}
		/"errors"/ {gsub(/[^0-9]/, "", $2); errs = $2}
		/"api_errors"/ {api = $0}
		/"throughput_per_min"/ {gsub(/[^0-9.]/, "", $2); tpm = $2}
		/"p50"/ {gsub(/[^0-9.]/, "", $2); p50 = $2}
		/"p99"/ {gsub(/[^0-9.]/, "", $2); p99 = $2}
		END {
			n = ok > 0 ? ok : 1
			printf "    %d requests, %d ok, %d errors, %.0f/min, p50 %.1f ms, p99 %.1f ms, pool misses %d\n", req, ok, errs, tpm, p50, p99, h1 - h0
			k = k1 > k0 ? k1 - k0 : 0
			printf "    CPU per execution: %.3f s: sandboxes (their kernels, gofers) %.3f s, airlockd with its runsc commands and tools %.3f s, host kernel threads %.3f s (the whole machine, with whatever else ran: %.3f s)\n", ((s1 - s0) + (d1 - d0) + k) / n / 1e9, (s1 - s0) / n / 1e9, (d1 - d0) / n / 1e9, k / n / 1e9, (m1 - m0) / n / 1e9
		}'
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "runsc: $(sha256sum "$(command -v runsc)" | cut -c1-12) (sha256 of the binary); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

if [ "${ONLY:-}" != sustain ]; then # ONLY=sustain runs the sustained series alone

title "host python3 -c 'print(1)' (no sandbox, no chroot)"
python3 - <<'PY' | sed 's/^/    /'
import subprocess, time, statistics
d = []
for _ in range(20):
    t = time.perf_counter(); subprocess.run(["python3", "-c", "print(1)"], stdout=subprocess.DEVNULL, check=True); d.append((time.perf_counter() - t) * 1000)
d.sort(); print(f"20 runs: p50 {statistics.median(d):.1f} ms, max {d[-1]:.1f} ms")
PY

title "floor: chroot IMAGE python3 (no isolation), one at a time"
baseline --kind chroot --code 'print(1)' --requests "$N"
baseline --kind chroot --code "$CHART" --requests "$NCHART"

title "bare runsc run of the same image, one at a time"
baseline --kind runsc --code 'print(1)' --requests "$N"
baseline --kind runsc --code "$CHART" --requests "$NCHART"

title "airlockd, pool miss (restore on demand): base snapshots, no pool"
start --pool-max 0
waitmetric 'airlock_snapshot_builds_total{result="built"}' 1
bench --code 'print(1)' --concurrency 1 --requests "$N" --duration 30m --warmup 2
bench --code "$CHART" --concurrency 1 --requests "$NCHART" --duration 30m --warmup 1
stop

title "airlockd, warm pool (defaults), paced: print(1) at 2/s, chart at 1/s"
start
waitmetric 'airlock_pool_size{image="python-ds",language="python-light"}' 1
waitmetric 'airlock_pool_size{image="python-ds",language="python"}' 1
bench --code 'print(1)' --concurrency 1 --requests 10 --duration 30m --rate 2 >/dev/null # warm-up
bench --code 'print(1)' --concurrency 1 --requests "$N" --duration 30m --rate 2
bench --code "$CHART" --concurrency 1 --requests "$NCHART" --duration 30m --rate 1

fi # ONLY

[ -n "$PID" ] || { start; waitmetric 'airlock_pool_size{image="python-ds",language="python-light"}' 1; }
title "sustained, back to back: print(1) 4 at once, chart 2 at once, $SUSTAIN each"
baseline --kind runsc --code 'print(1)' --concurrency 4 --duration "$SUSTAIN" --warmup 0
bench --code 'print(1)' --concurrency 4 --duration "$SUSTAIN"
baseline --kind runsc --code "$CHART" --concurrency 2 --duration "$SUSTAIN" --warmup 0
bench --code "$CHART" --concurrency 2 --duration "$SUSTAIN"

if [ "${ONLY:-}" != sustain ]; then
title "saturation: print(1) at 1, 2, 4, 8 and 16 at once, $STEP each (16: overload; past the queue, 503 with Retry-After)"
for c in 1 2 4 8 16; do
	echo "  $c at once:"
	bench --code 'print(1)' --concurrency "$c" --duration "$STEP"
done
echo "    (api errors by status in the last step: $("$BIN/airlock" node bench --code 'print(1)' --concurrency 16 --duration 10s -o json | tr -d '\n ' | sed -n 's/.*"api_errors":\({[^}]*}\).*/\1/p'))"

title "40 print(1) requests sent at once"
bench --code 'print(1)' --concurrency 40 --requests 40 --duration 5m

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
fi
stop
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
