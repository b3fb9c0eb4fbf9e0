#!/usr/bin/env python3
"""Create-to-first-result series against airlockd's REST API, the way the
independent sandbox benchmark measures its peers: one sandbox after
another, each created, given one command, timed from the create request
to the command's result, then destroyed (the destroy is not timed).

  scripts/bench-create.py exec N     session create -> exec `echo hi`
  scripts/bench-create.py cell N     session create -> Python context -> cell print(1)
  scripts/bench-create.py oneshot N  POST /v1/execute print(1) (create, run and destroy in one call)

Optional --rate R starts one sandbox every 1/R s (default: back to back).
AIRLOCK_URL and AIRLOCK_API_KEY say where and as whom; or AIRLOCK_TARGETS,
"label=url=key,label=url=key", names several servers, which then take
turns, sandbox by sandbox, so that each sees the same load (a
before-and-after in one run). Prints one line per server: n, p50, p90,
p99, min, max in ms (nearest rank), and the start sources.
Only the standard library: runs wherever python3 does.
"""
import http.client
import json
import math
import os
import sys
import time
import urllib.parse


def pct(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


class API:
    def __init__(self, url, key):
        u = urllib.parse.urlsplit(url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            sys.exit("bench-create: AIRLOCK_URL must be a loopback address")
        self.conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=120)
        self.headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body)
        self.conn.request(method, path, body=data, headers=self.headers)
        r = self.conn.getresponse()
        raw = r.read()
        if r.status >= 300:
            raise RuntimeError("%s %s: %d %s" % (method, path, r.status, raw[:300]))
        return json.loads(raw) if raw else None


def one(api, kind):
    """One sandbox: returns (ms to the first result, start source)."""
    t0 = time.perf_counter()
    if kind == "oneshot":
        e = api.call("POST", "/v1/execute", {"language": "python", "code": "print(1)"})
        ms = (time.perf_counter() - t0) * 1000
        if e.get("stdout") != "1\n":
            raise RuntimeError("unexpected result %s" % e)
        return ms, e.get("start_source", "")
    s = api.call("POST", "/v1/sessions", {"image": "python-ds"})
    sid = s["session_id"]
    try:
        if kind == "exec":
            e = api.call("POST", "/v1/sessions/%s/exec" % sid, {"shell": "echo hi"})
            ok = e.get("stdout") == "hi\n"
        else:
            c = api.call("POST", "/v1/sessions/%s/contexts" % sid, {"language": "python"})
            e = api.call("POST", "/v1/sessions/%s/contexts/%s/run" % (sid, c["context_id"]), {"code": "print(1)"})
            ok = e.get("stdout") == "1\n"
        ms = (time.perf_counter() - t0) * 1000
        if not ok:
            raise RuntimeError("unexpected result %s" % e)
    finally:
        api.call("DELETE", "/v1/sessions/%s" % sid)
    return ms, s.get("start_source", "")


def main():
    args = sys.argv[1:]
    rate = 0.0
    if "--rate" in args:
        i = args.index("--rate")
        rate = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2 or args[0] not in ("exec", "cell", "oneshot"):
        sys.exit(__doc__)
    kind, n = args[0], int(args[1])
    targets = []
    for t in filter(None, os.environ.get("AIRLOCK_TARGETS", "").split(",")):
        label, url, key = t.split("=", 2)
        targets.append((label + ": ", API(url, key)))
    if not targets:
        targets = [("", API(os.environ.get("AIRLOCK_URL", "http://127.0.0.1:8080"), os.environ["AIRLOCK_API_KEY"]))]
    times = [[] for _ in targets]
    sources = [{} for _ in targets]
    errors = [[] for _ in targets]
    next_at = time.monotonic()
    for _ in range(n):
        for i, (_, api) in enumerate(targets):
            if rate > 0:
                now = time.monotonic()
                if next_at > now:
                    time.sleep(next_at - now)
                next_at += 1 / rate
            try:
                ms, src = one(api, kind)
            except Exception as e:  # counted and shown, the series goes on
                errors[i].append(str(e)[:300])
                continue
            times[i].append(ms)
            sources[i][src] = sources[i].get(src, 0) + 1
    for i, (label, _) in enumerate(targets):
        ts = times[i] or [0.0]
        for e in errors[i]:
            print("%serror: %s" % (label, e))
        print("%s%s: n=%d p50=%.1f p90=%.1f p99=%.1f min=%.1f max=%.1f ms; start %s" % (
            label, kind, len(ts), pct(ts, 50), pct(ts, 90), pct(ts, 99), min(ts), max(ts),
            ", ".join("%s %d" % kv for kv in sorted(sources[i].items())))
            + ("; %d errors" % len(errors[i]) if errors[i] else ""))

if __name__ == "__main__":
    main()
