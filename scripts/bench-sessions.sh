#!/usr/bin/env bash
# Runs the session benchmarks of BENCHMARKS.md on this machine only (every
# request goes to 127.0.0.1) and prints the figures: session create to
# ready (python-ds, size small) from the warm pool, restored on demand and
# booted cold, and the time from an airlockd start to all of N live
# sessions taken back after a SIGKILL. With BEFORE=<commit>, the create
# series is also run against an airlockd built from that commit (the
# same load tool, this tree's `airlock bench --sessions`). Needs root and
# what scripts/setup.sh builds.
#
#   sudo scripts/bench-sessions.sh
#   BEFORE=9039b5b N=30 LIVE=20 sudo scripts/bench-sessions.sh
#   ONLY=restart LIVE=20 sudo scripts/bench-sessions.sh   # the restart section alone
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$REPO/bin"
STATE="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
N="${N:-30}"         # sessions per create series
LIVE="${LIVE:-20}"   # live sessions across a restart
ROUNDS="${ROUNDS:-3}" # restarts measured
PORT="${PORT:-18081}"
PARENT="airlock-bench-$$"
WORK="$(mktemp -d /tmp/airlock-bench-XXXXXX)"
ln -s "$STATE/images" "$WORK/images"
WORKS=("$WORK")
PID=""
AIRLOCKD="$BIN/airlockd"
AGENT="$BIN/airlock-agent"

cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
	if [ -n "${OLD:-}" ]; then git -C "$REPO" worktree remove --force "$OLD" >/dev/null 2>&1 || true; fi
	# The sessions of the restart rounds: a last airlockd takes them back
	# and ends them at its clean stop.
	if [ -f "$WORK/airlock.db" ]; then
		AIRLOCKD="$BIN/airlockd" AGENT="$BIN/airlock-agent"
		start --keep-sessions=false --warm "" --warm-sessions "" --pool-max 0 || true
		[ -n "$PID" ] && stop
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

start() { # flags...
	"$AIRLOCKD" --listen "127.0.0.1:$PORT" --state-dir "$WORK" --agent "$AGENT" \
		--cgroup-parent "$PARENT" "$@" >>"$WORK/airlockd.log" 2>&1 &
	PID=$!
	for _ in $(seq 600); do
		curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break
		sleep 0.05
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
bench() { "$BIN/airlock" node bench --sessions --image python-ds "$@" | sed 's/^/    /'; }
api() { curl -sf -H "Authorization: Bearer $AIRLOCK_API_KEY" -H 'Content-Type: application/json' "$@"; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

if [ -n "${BEFORE:-}" ]; then
	title "before: airlockd of $BEFORE (sessions always boot cold)"
	OLD="$(mktemp -d /tmp/airlock-old-XXXXXX)"
	rmdir "$OLD"
	git -C "$REPO" worktree add --detach "$OLD" "$BEFORE" >/dev/null
	(cd "$OLD" && CGO_ENABLED=0 go build -trimpath -o "$OLD/bin/" ./cmd/airlockd ./cmd/airlock-agent)
	"$BIN/airlock" node image build --state-dir "$STATE" --agent "$OLD/bin/airlock-agent" python-ds >/dev/null
	AIRLOCKD="$OLD/bin/airlockd" AGENT="$OLD/bin/airlock-agent"
	NEW="$WORK"
	WORK="$(mktemp -d /tmp/airlock-bench-XXXXXX)" # a state directory of its own
	ln -s "$STATE/images" "$WORK/images"
	WORKS+=("$WORK")
	start --warm ""
	bench --concurrency 1 --requests "$N" --duration 30m --warmup 2
	stop
	AIRLOCKD="$BIN/airlockd" AGENT="$BIN/airlock-agent" WORK="$NEW"
fi

if [ "${ONLY:-}" != restart ]; then # ONLY=restart runs the last section alone

title "after: sessions from the warm pool (defaults; paced at one every 3 s so the pool refills)"
start --warm ""
waitmetric 'airlock_pool_size{image="python-ds",language="agent"}' 1
bench --concurrency 1 --requests "$N" --duration 30m --rate 0.33

title "after: back to back (the pool of one empties: restores of the base snapshot on demand)"
bench --concurrency 1 --requests "$N" --duration 30m
echo "    pool hits $(metric 'airlock_pool_hits_total{image="python-ds",language="agent"}'), misses $(metric 'airlock_pool_misses_total{image="python-ds",language="agent"}') over both series"
stop

title "after: cold (no snapshots, no pool: every session boots)"
start --warm "" --warm-sessions "" --base-snapshots=false --pool-max 0
bench --concurrency 1 --requests "$N" --duration 30m --warmup 2
stop

fi # ONLY

title "restart with $LIVE live sessions: airlockd start to all of them taken back (SIGKILL, $ROUNDS rounds)"
# airlockd's defaults for sessions (python-ds/small from the warm pool):
# the sessions are a mix of pool members, named for the pool, and
# sandboxes booted for themselves, and both kinds must come back.
RESTART=(--warm "" --max-sessions "$((LIVE + 8))" --max-sessions-per-tenant "$LIVE")
start "${RESTART[@]}"
ids=()
for i in $(seq "$LIVE"); do
	doc=$(api "$AIRLOCK_URL/v1/sessions" -d '{"image": "python-ds", "timeout_s": 3600}')
	echo "$doc" >>"$WORK/created.json"
	id=$(echo "$doc" | sed -E 's/.*"session_id":"([0-9a-f]+)".*/\1/')
	api "$AIRLOCK_URL/v1/sessions/$id/exec" -d '{"shell": "echo kept > kept.txt"}' >/dev/null
	ids+=("$id")
done
pooled=$(grep -c '"start_source":"pool"' "$WORK/created.json" || true)
echo "    $LIVE sessions live ($pooled from the pool); load average $(cut -d' ' -f1 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	kill -9 "$PID"; wait "$PID" 2>/dev/null || true; PID=""
	t0=$(date +%s%N)
	start "${RESTART[@]}"
	t1=$(date +%s%N)
	ok=0
	for id in "${ids[@]}"; do
		api "$AIRLOCK_URL/v1/sessions/$id/exec" -d '{"shell": "cat kept.txt"}' | grep -q '"stdout":"kept\\n"' && ok=$((ok + 1))
	done
	t2=$(date +%s%N)
	took=$(grep 'sessions recovered' "$WORK/airlockd.log" | tail -1 | sed -E 's/.*took=([^ ]+).*/\1/')
	echo "    round $r: serving $(( (t1 - t0) / 1000000 )) ms after the start (recovery inside: $took); $ok of $LIVE sessions answered an exec, all by $(( (t2 - t0) / 1000000 )) ms"
done
stop
