#!/usr/bin/env python3
"""Samples the CPU of runsc's sandbox and gofer processes (for
scripts/cpu-account.sh): every 50 ms it reads /proc/<pid>/stat of every
process whose command line starts with runsc-sandbox or runsc-gofer and
whose arguments name the runsc root given, keeping the last user and
system ticks seen per process. On SIGTERM it prints, in CPU-seconds:
"sandbox_user sandbox_sys gofer_user gofer_sys processes". A process's
CPU after its last sample (its last 50 ms, the kill) is missed, so the
totals are a lower bound; cpu-account.sh takes only their ratio."""
import os
import signal
import sys
import time

root = sys.argv[1].encode()
hz = os.sysconf("SC_CLK_TCK")
seen = {}  # pid -> (kind, utime, stime)
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
while not stop:
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read()
            if not (cmd.startswith(b"runsc-sandbox") or cmd.startswith(b"runsc-gofer")) or root not in cmd:
                continue
            with open("/proc/%s/stat" % name, "rb") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(b")") + 2:].split()
        kind = "sandbox" if cmd.startswith(b"runsc-sandbox") else "gofer"
        seen[int(name)] = (kind, int(fields[11]), int(fields[12]))
    time.sleep(0.05)
tot = {"sandbox": [0, 0], "gofer": [0, 0]}
for kind, u, s in seen.values():
    tot[kind][0] += u
    tot[kind][1] += s
print("%.3f %.3f %.3f %.3f %d" % (tot["sandbox"][0] / hz, tot["sandbox"][1] / hz, tot["gofer"][0] / hz, tot["gofer"][1] / hz, len(seen)))
