#!/usr/bin/env bash
# Host CPU per completed run, by phase and by process, for one-shot
# print(1) sustained CONC at once (docs/performance.md, "Host CPU per
# run"), beside a bare `runsc run` of the same rootfs in the same run.
#
#   1. bare: `airlock node baseline --kind runsc` CONC at once for DUR,
#      the tool and its runsc commands in one cpuacct cgroup, the
#      sandboxes in another;
#   2. airlockd on a fresh state directory (the images shared, its
#      defaults), in a cpuacct cgroup of its own (with the runsc commands
#      it runs), the sandboxes under --cgroup-parent; after its pool is
#      warm, `airlock node bench` CONC at once for DUR while
#        - a CPU profile of airlockd is taken over the window (pprof over
#          --debug-listen) and mapped to phases by function
#          (scripts/cpu-phases.py),
#        - every runsc command airlockd runs is timed (a `runsc` first on
#          its PATH that runs the real one under /usr/bin/time),
#        - the sandbox and gofer processes are sampled from /proc
#          (scripts/cpu-procs.py) to split the sandboxes' cgroup CPU
#          between them,
#        - the host's kernel threads (loop devices, kworkers) are read
#          from /proc before and after (shared with everything else that
#          runs on the machine).
#
# Every figure is CPU-seconds divided by completed runs. The machine may
# be shared: CPU-seconds are inflated less by load than wall time, but
# contention still costs CPU (cache misses, more context switches), and
# the kernel threads are the whole machine's. Compare ratios of the same
# run only.
#
#   sudo scripts/cpu-account.sh
#   DUR=60s CONC=4 KEEP=/tmp/acct BEFORE_BIN=/tmp/old sudo -E scripts/cpu-account.sh
#
# With BEFORE_BIN naming a directory holding the airlockd of an earlier
# build, its series runs first, after the bare one, for a before and
# after in one run.
#
# AIRLOCK_BIN (default ./bin) holds airlockd, airlock and airlock-agent;
# EXTRA_FLAGS are more airlockd flags; KEEP=<dir> keeps each series'
# profile, runsc command log and airlockd log there. Needs root, cgroup v1's
# cpuacct (as on the development machines) and what scripts/setup.sh
# builds.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${AIRLOCK_BIN:-$REPO/bin}"
STATE="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
DUR="${DUR:-60s}"
CONC="${CONC:-4}"
PORT="${PORT:-18092}"
DEBUG_PORT=$((PORT + 1))
TAG="airlock-acct-$$"
CG=/sys/fs/cgroup/cpuacct
RUNSC="$(command -v runsc)"
[ -f "$CG/cpuacct.usage" ] || { echo "needs cgroup v1 cpuacct at $CG" >&2; exit 1; }
WORK="$(mktemp -d /tmp/airlock-acct-XXXXXX)"
PID=""
SAMPLER=""
cleanup() {
	[ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null || true
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
	for m in $(awk -v w="$WORK" '$5 ~ "^"w {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" || true; done
	rm -rf "$WORK"
	for c in "$TAG-bare-tool" "$TAG-bare" "$TAG-before" "$TAG-before-sb" "$TAG-after" "$TAG-after-sb"; do
		for d in /sys/fs/cgroup/*/"$c"; do [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; done
	done
}
trap cleanup EXIT

usage() { cat "$CG/$1/cpuacct.usage" 2>/dev/null || echo 0; }     # ns
usage_sys() { cat "$CG/$1/cpuacct.usage_sys" 2>/dev/null || echo 0; } # ns
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{s=$0; sub(/.*\) /, "", s); split(s, f, " "); printf "%.0f\n", (f[12] + f[13]) * 1e9 / hz}' "/proc/$1/stat"; }
kthreads() { # ns of every kernel thread (children of kthreadd)
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } |
		awk -v hz="$(getconf CLK_TCK)" '{s=$0; sub(/.*\) /, "", s); split(s, f, " "); if (f[2] == 2) t += f[12] + f[13]} END {printf "%.0f\n", t * 1e9 / hz}'
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
secs() { local d="$1"; case "$d" in *m) echo $(( ${d%m} * 60 ));; *s) echo "${d%s}";; *) echo "$d";; esac; }
jget() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "load average before: $(load)"

# 1. bare runsc.
mkdir -p "$CG/$TAG-bare-tool" "$CG/$TAG-bare"
b0=$(usage "$TAG-bare-tool"); bs0=$(usage "$TAG-bare"); bss0=$(usage_sys "$TAG-bare"); bk0=$(kthreads)
"$REPO/scripts/cpu-procs.py" "baseline-" >"$WORK/bare-procs.txt" &
SAMPLER=$!
(echo "$BASHPID" >"$CG/$TAG-bare-tool/cgroup.procs"; exec "$BIN/airlock" node baseline --kind runsc --state-dir "$STATE" \
	--concurrency "$CONC" --duration "$DUR" --cgroup-parent "$TAG-bare" -o json) >"$WORK/bare.json"
b1=$(usage "$TAG-bare-tool"); bs1=$(usage "$TAG-bare"); bss1=$(usage_sys "$TAG-bare"); bk1=$(kthreads)
kill "$SAMPLER"; wait "$SAMPLER" || true; SAMPLER=""
echo "load average after the bare series: $(load)"

# 2. airlockd: series LABEL AIRLOCKD-BINARY, on a fresh state directory.
series() {
	local label="$1" airlockd="$2" W="$WORK/$1"
	mkdir -p "$W/wrap" "$CG/$TAG-$label"
	ln -s "$STATE/images" "$W/images"
	cat >"$W/wrap/runsc" <<WRAP
#!/bin/sh
exec /usr/bin/time -a -o "$W/runsc-cli.log" -f "%U %S %C" "$RUNSC" "\$@"
WRAP
	chmod +x "$W/wrap/runsc"
	(echo "$BASHPID" >"$CG/$TAG-$label/cgroup.procs"; PATH="$W/wrap:$PATH" exec "$airlockd" --listen "127.0.0.1:$PORT" \
		--state-dir "$W" --agent "$BIN/airlock-agent" --cgroup-parent "$TAG-$label-sb" --keep-sessions=false \
		--debug-listen "127.0.0.1:$DEBUG_PORT" ${EXTRA_FLAGS:-}) >>"$W/airlockd.log" 2>&1 &
	PID=$!
	export AIRLOCK_URL="http://127.0.0.1:$PORT"
	for _ in $(seq 3600); do curl -sf "$AIRLOCK_URL/readyz?warm=true" >/dev/null && break; sleep 0.1; done
	export AIRLOCK_API_KEY="$(cat "$W/default.key")"
	# A short warm-up so that the pool has grown to the load's size.
	"$BIN/airlock" node bench --concurrency "$CONC" --requests $((CONC * 4)) -o json >/dev/null
	echo "load average before the $label series: $(load)"
	touch "$W/runsc-cli.log"
	local l0 l1 a0 a1 as0 as1 ass0 ass1 ad0 ad1 ak0 ak1 prof
	l0=$(wc -l <"$W/runsc-cli.log")
	a0=$(usage "$TAG-$label"); as0=$(usage "$TAG-$label-sb"); ass0=$(usage_sys "$TAG-$label-sb"); ad0=$(proc_cpu "$PID"); ak0=$(kthreads)
	"$REPO/scripts/cpu-procs.py" "$W/" >"$W/procs.txt" &
	SAMPLER=$!
	curl -s -o "$W/cpu.pprof" "http://127.0.0.1:$DEBUG_PORT/debug/pprof/profile?seconds=$(secs "$DUR")" &
	prof=$!
	"$BIN/airlock" node bench --concurrency "$CONC" --duration "$DUR" -o json >"$W/bench.json"
	a1=$(usage "$TAG-$label"); as1=$(usage "$TAG-$label-sb"); ass1=$(usage_sys "$TAG-$label-sb"); ad1=$(proc_cpu "$PID"); ak1=$(kthreads)
	l1=$(wc -l <"$W/runsc-cli.log")
	kill "$SAMPLER"; wait "$SAMPLER" || true; SAMPLER=""
	wait "$prof" || true
	echo "load average after the $label series: $(load)"
	kill "$PID"; wait "$PID" || true; PID=""
	sed -n "$((l0 + 1)),${l1}p" "$W/runsc-cli.log" >"$W/runsc-window.log"
	printf '\n### %s (%s)\n' "$label" "$airlockd"
	python3 "$REPO/scripts/cpu-report.py" \
		--bare "$WORK/bare.json" --bare-tool $((b1 - b0)) --bare-sandboxes $((bs1 - bs0)) --bare-kthreads $((bk1 - bk0)) --bare-sandboxes-sys $((bss1 - bss0)) \
		--bare-procs "$(cat "$WORK/bare-procs.txt")" \
		--bench "$W/bench.json" --airlockd-cgroup $((a1 - a0)) --airlockd-own $((ad1 - ad0)) \
		--sandboxes $((as1 - as0)) --sandboxes-sys $((ass1 - ass0)) --kthreads $((ak1 - ak0)) \
		--procs "$(cat "$W/procs.txt")" --runsc-log "$W/runsc-window.log" \
		--phases "$(python3 "$REPO/scripts/cpu-phases.py" "$airlockd" "$W/cpu.pprof")"
	if [ -n "${KEEP:-}" ]; then
		mkdir -p "$KEEP/$label"
		cp "$W"/*.log "$W"/*.pprof "$W"/*.json "$KEEP/$label"/ 2>/dev/null || true
	fi
	for m in $(awk -v w="$W" '$5 ~ "^"w {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" || true; done
	rm -rf "$W"
}
if [ -n "${BEFORE_BIN:-}" ]; then series before "$BEFORE_BIN/airlockd"; fi
series after "$BIN/airlockd"
