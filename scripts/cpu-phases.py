#!/usr/bin/env python3
"""Maps a CPU profile of airlockd to the phases of a run (for
scripts/cpu-account.sh): each sample goes to the first phase below that
has a function anywhere on its stack, so a phase's share is the CPU spent
under its functions (and what they call). Prints JSON: seconds by phase.

    scripts/cpu-phases.py bin/airlockd cpu.pprof
"""
import json
import re
import subprocess
import sys

# First match wins: a pool fill under a request's stack (a miss that
# waited) is still replenishment, a store write under a destroy is the
# store's.
PHASES = [
    ("store (SQLite)", r"airlock/store\.|airlock/store/|database/sql\.|sqlite"),
    ("replenishment (pool fill)", r"provision\.\(\*pool\)\.fill|provision\.\(\*Provisioner\)\.ready$|provision\.prepare$|provision\.startImage$"),
    ("base snapshots", r"provision\.\(\*snapshots\)|provision\..*[Ss]napshot|gvisor\.\(\*Backend\)\.Checkpoint"),
    ("destroy", r"provision\.\(\*Provisioner\)\.destroyLater|gvisor\.\(\*Sandbox\)\.(destroy|kill|Destroy)$|gvisor\.\(\*deleter\)"),
    ("collect", r"run\.\(\*programRun\)\.conclude|oneshot\.\(\*Manager\)\.collect|oneshot\.snapshotDir|oneshot\.walk"),
    ("hand-in", r"run\.\(\*Runner\)\.start$"),
    ("run (wait, output)", r"run\.\(\*Runner\)\.wait$|run\.\(\*capture\)"),
    ("agent channel (all phases)", r"agent/protocol\.|sandboxio\."),
    ("acquire", r"provision\.\(\*Provisioner\)\.(sandboxFor|make|restore|Admit|acquire|Acquire)|provision\.\(\*pool\)\.take|provision\.\(\*admission\)"),
    ("pool upkeep", r"provision\.\(\*pool\)\.(run|step|target)"),
    ("API (HTTP, JSON, auth, guard)", r"net/http\.|api/rest\.|encoding/json\.|oneshot\.\(\*Manager\)\.Execute|service/guard\.|run\.\(\*Runner\)\.(Begin|finish|Fail)"),
    ("metrics, watchers", r"prometheus|service/abuse|service/watch|node\.\(\*Node\)\.(sample|watch)"),
    ("Go runtime (GC, scheduler)", r"^runtime\.|^gcWriteBarrier"),
]
COMPILED = [(name, re.compile(rx)) for name, rx in PHASES]


def seconds(v):
    m = re.match(r"([0-9.]+)(ns|us|µs|ms|s|m|h)?$", v)
    if not m:
        return 0.0
    x = float(m.group(1))
    return x * {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def samples(binary, profile):
    out = subprocess.run(["go", "tool", "pprof", "-traces", binary, profile], capture_output=True, text=True, check=True).stdout
    cur, frames = None, []
    for line in out.splitlines():
        if line.startswith("-----------+"):
            if cur is not None:
                yield cur, frames
            cur, frames = None, []
            continue
        if cur is None:
            parts = line.split()
            if len(parts) >= 2 and re.match(r"^[0-9.]+(ns|us|µs|ms|s|m|h)$", parts[0]):
                cur, frames = seconds(parts[0]), [parts[1]]
            continue
        f = line.strip()
        if f:
            frames.append(f.split()[0])
    if cur is not None:
        yield cur, frames


def phase_of(frames):
    for name, rx in COMPILED:
        if name.startswith("Go runtime"):
            # Only when nothing of Airlock is on the stack.
            if not any(f.startswith("github.com/airlockhq") for f in frames) and any(rx.search(f) for f in frames):
                return name
            continue
        if any(rx.search(f) for f in frames):
            return name
    return "other"


def main():
    acct = {}
    total = 0.0
    for v, frames in samples(sys.argv[1], sys.argv[2]):
        p = phase_of(frames)
        acct[p] = acct.get(p, 0.0) + v
        total += v
    acct["_total"] = total
    print(json.dumps(acct))


if __name__ == "__main__":
    main()
