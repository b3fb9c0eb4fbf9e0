#!/usr/bin/env python3
"""Prints the CPU account of scripts/cpu-account.sh: CPU-seconds per
completed run, by process and by phase, airlockd beside a bare `runsc
run`. Inputs are what cpu-account.sh measured (nanoseconds unless said)."""
import argparse
import json
import re

ap = argparse.ArgumentParser()
for a in ["bare", "bench", "procs", "bare_procs", "runsc_log", "phases"]:
    ap.add_argument("--" + a.replace("_", "-"), required=True)
for a in ["bare_tool", "bare_sandboxes", "bare_kthreads", "bare_sandboxes_sys", "airlockd_cgroup", "airlockd_own", "sandboxes", "sandboxes_sys", "kthreads"]:
    ap.add_argument("--" + a.replace("_", "-"), type=float, required=True)
o = ap.parse_args()

bare = json.load(open(o.bare))
bench = json.load(open(o.bench))
nb = max(1, bare.get("ok", bare.get("requests", 0)))
na = max(1, bench.get("ok", 0))
NS = 1e9


def split(txt):  # sandbox_user sandbox_sys gofer_user gofer_sys n
    f = [float(x) for x in txt.split()] if txt.strip() else [0, 0, 0, 0, 0]
    sb, gf = f[0] + f[1], f[2] + f[3]
    return (sb / (sb + gf) if sb + gf > 0 else 1.0), int(f[4])


# runsc commands by subcommand (user+sys of each, from /usr/bin/time).
cmds = {}
for line in open(o.runsc_log):
    parts = line.split()
    if len(parts) < 3:
        continue
    try:
        cpu = float(parts[0]) + float(parts[1])
    except ValueError:
        continue
    sub = next((w for w in parts[3:] if not w.startswith("-") and re.match(r"^[a-z]+$", w) and w in
                ("run", "restore", "delete", "kill", "checkpoint", "state", "list", "events", "ps", "wait", "create", "start", "exec", "pause", "resume")), "other")
    n, c = cmds.get(sub, (0, 0.0))
    cmds[sub] = (n + 1, c + cpu)
runsc_cli = sum(c for _, c in cmds.values()) * NS

phases = json.loads(o.phases)
prof_total = phases.pop("_total", 0.0)
own = o.airlockd_own
frac_b, nprocs_b = split(o.bare_procs)
frac_a, nprocs_a = split(o.procs)
rest = o.airlockd_cgroup - own - runsc_cli

print()
print("runs: bare runsc %d in %.0f s (%.1f/min); airlockd %d ok of %d in %.0f s (%.1f/min), p50 %.0f ms, p99 %.0f ms" % (
    nb, bare.get("elapsed_s", 0), bare.get("throughput_per_min", 0), na, bench.get("requests", 0), bench.get("elapsed_s", 0),
    bench.get("throughput_per_min", 0), bench["latency_ms"]["p50"], bench["latency_ms"]["p99"]))
print()
print("CPU-seconds per completed run, by process:")
print()
print("| process | bare runsc | airlockd | difference |")
print("|---|---|---|---|")
rows = []
bsb = o.bare_sandboxes / nb / NS
asb = o.sandboxes / na / NS
rows.append(("runsc sandbox processes (gVisor kernel), from the sandboxes' cgroups x the sampled share", bsb * frac_b, asb * frac_a))
rows.append(("runsc gofers, likewise", bsb * (1 - frac_b), asb * (1 - frac_a)))
rows.append(("  of the sandboxes' cgroups: in the host kernel (system time)", o.bare_sandboxes_sys / nb / NS, o.sandboxes_sys / na / NS))
rows.append(("runsc commands (`runsc run`, `restore`, `delete`, ...)", None, runsc_cli / na / NS))
rows.append(("the baseline tool with its `runsc run` commands (their cgroup)", o.bare_tool / nb / NS, None))
rows.append(("airlockd itself (its threads, /proc/PID/stat)", None, own / na / NS))
rows.append(("  not counted: the rest of airlockd's cgroup (the timing wrapper of runsc commands)", None, rest / na / NS))
rows.append(("host kernel threads (loop devices, kworkers: the whole machine's)", o.bare_kthreads / nb / NS, o.kthreads / na / NS))
tb = (o.bare_tool + o.bare_sandboxes + o.bare_kthreads) / nb / NS
ta = (own + runsc_cli + o.sandboxes + o.kthreads) / na / NS
for name, b, a in rows:
    fb = "%.3f" % b if b is not None else ""
    fa = "%.3f" % a if a is not None else ""
    d = "%+.3f" % ((a or 0) - (b or 0)) if not name.startswith("  ") else ""
    print("| %s | %s | %s | %s |" % (name, fb, fa, d))
print("| **total** (without the timing wrapper) | **%.3f** | **%.3f** | %+.3f (%.2fx) |" % (tb, ta, ta - tb, ta / tb if tb else 0))
print()
print("sandbox and gofer processes sampled: bare %d, airlockd %d; runsc commands in the window: %s" % (
    nprocs_b, nprocs_a, ", ".join("%s %d (%.1f ms each)" % (k, n, c / n * 1000) for k, (n, c) in sorted(cmds.items()))))
print()
print("airlockd's own CPU by phase (its CPU profile over the window, %.1f s of samples, scaled to its measured %.3f CPU-s per run):" % (prof_total, own / na / NS))
print()
print("| phase | CPU-s per run | share of airlockd |")
print("|---|---|---|")
for name, v in sorted(phases.items(), key=lambda kv: -kv[1]):
    share = v / prof_total if prof_total else 0
    print("| %s | %.4f | %.0f%% |" % (name, share * own / na / NS, share * 100))
