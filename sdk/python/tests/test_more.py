"""Unit tests of paging, retries, the wider API and the async client,
against the in-process stub server of test_unit."""

import asyncio
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(__file__))

import airlock  # noqa: E402
from test_unit import Stub, StubServerTest as StubTest, reply  # noqa: E402

SESSION = {"session_id": "s1", "state": "running", "image": "python-ds", "size": "small",
           "expires_at": "2026-12-01T00:00:00Z"}


def sequence(*handlers):
    """Answers with each handler in turn, the last one for ever after."""
    state = {"n": 0}

    def h(req, body):
        i = min(state["n"], len(handlers) - 1)
        state["n"] += 1
        handlers[i](req, body)
    return h


def paged(member, pages):
    """Serves pages of a listing by the ``before`` cursor."""
    def h(req, body):
        m = re.search(r"[?&]before=([^&]*)", req.path)
        cur = m.group(1) if m else ""
        items, nxt = pages[cur]
        reply(200, {member: items, "next_cursor": nxt})(req, body)
    return h


class PagingTest(StubTest):
    def test_page_keeps_the_cursor_and_iter_follows_it(self):
        Stub.routes[("GET", "/v1/executions")] = paged("executions", {
            "": ([{"execution_id": "e3"}, {"execution_id": "e2"}], "c2"),
            "c2": ([{"execution_id": "e1"}], ""),
        })
        page = self.al.executions(limit=2)
        self.assertEqual(([e.execution_id for e in page], page.next_cursor), (["e3", "e2"], "c2"))
        self.assertEqual([e.execution_id for e in self.al.iter_executions(page_size=2)], ["e3", "e2", "e1"])
        self.assertIn("limit=2", Stub.seen[-1][1])
        self.assertIn("before=c2", Stub.seen[-1][1])

    def test_event_feed_reads_pages_oldest_first(self):
        def feed(req, body):
            m = re.search(r"[?&]cursor=([^&]*)", req.path)
            cur = m.group(1) if m else None
            pages = {"": ([{"id": "a", "type": "session.created", "session_id": "s1"},
                           {"id": "b", "type": "session.paused", "session_id": "s1", "reason": "idle"}], "b"),
                     "b": ([{"id": "c", "type": "session.ended", "session_id": "s1"}], "c"),
                     "c": ([], "c")}
            items, nxt = pages[cur]
            reply(200, {"events": items, "next_cursor": nxt})(req, body)
        Stub.routes[("GET", "/v1/events")] = feed
        evs = list(self.al.events(limit=2))
        self.assertEqual([e.id for e in evs], ["a", "b", "c"])
        self.assertEqual(evs[1].reason, "idle")
        self.assertEqual([e.id for e in self.al.events(cursor="b", limit=2)], ["c"])
        self.assertIn("cursor=", Stub.seen[0][1])

    def test_iter_stops_on_a_repeated_cursor(self):
        Stub.routes[("GET", "/v1/sessions")] = paged("sessions", {
            "": ([SESSION], "loop"), "loop": ([SESSION], "loop"),
        })
        got = list(self.al.iter_sessions(live=False))
        self.assertEqual(len(got), 2)
        self.assertIn("state=all", Stub.seen[0][1])

    def test_snapshots_events_and_usage(self):
        Stub.routes[("GET", "/v1/snapshots")] = paged("snapshots", {
            "": ([{"snapshot_id": "sn1", "kind": "files", "bytes": 42}], "")})
        Stub.routes[("GET", "/v1/events")] = paged("events", {
            "": ([{"event_id": "ev1", "detector": "miner", "action": "killed", "time": "t"}], "")})
        Stub.routes[("GET", "/v1/usage")] = reply(200, {"tenant_id": "t1", "quotas": [
            {"quota": "sessions", "limit": 3, "used": 1, "remaining": 2}]})
        (sn,) = self.al.iter_snapshots()
        self.assertEqual((sn.snapshot_id, sn.size_bytes), ("sn1", 42))
        (ev,) = self.al.iter_abuse_events()
        self.assertEqual((ev.event_id, ev.detector, ev.at), ("ev1", "miner", "t"))
        u = self.al.usage()
        self.assertEqual(u.quota("sessions").remaining, 2)
        self.assertIsNone(u.quota("nope"))


class SessionMethodsTest(StubTest):
    def test_every_session_call_sends_its_request(self):
        Stub.routes[("POST", "/v1/sessions")] = reply(201, SESSION)
        for path in ("/v1/sessions/s1/pause", "/v1/sessions/s1/resume", "/v1/sessions/s1/timeout"):
            Stub.routes[("POST", path)] = reply(200, dict(SESSION, state="paused" if "pause" in path else "running"))
        Stub.routes[("PUT", "/v1/sessions/s1/network")] = reply(200, SESSION)
        Stub.routes[("POST", "/v1/sessions/s1/snapshots")] = reply(201, {"snapshot_id": "sn1", "kind": "memory"})
        Stub.routes[("POST", "/v1/sessions/s1/fork")] = reply(201, {"sessions": [dict(SESSION, session_id="s2")]})
        Stub.routes[("POST", "/v1/sessions/s1/exec/7/signal")] = reply(204, raw=b"")
        Stub.routes[("GET", "/v1/sessions/s1/contexts")] = reply(200, {"contexts": [{"context_id": "c1", "state": "idle"}]})
        Stub.routes[("GET", "/v1/sessions/s1/egress")] = paged("events", {"": ([{"seq": 1, "verdict": "denied"}], "")})
        s = self.al.session(image="python-ds", from_snapshot="sn0")
        self.assertEqual(json.loads(Stub.seen[-1][3]), {"image": "python-ds", "from_snapshot": "sn0"})
        self.assertEqual(s.pause().state, "paused")
        self.assertEqual(s.resume().state, "running")
        s.extend(600)
        self.assertEqual(json.loads(Stub.seen[-1][3]), {"timeout_s": 600})
        s.set_network("allowlist", ["pypi.test"])
        self.assertEqual(json.loads(Stub.seen[-1][3]), {"mode": "allowlist", "allow": ["pypi.test"]})
        self.assertEqual(s.snapshot("before", include_memory=True).kind, "memory")
        self.assertEqual(json.loads(Stub.seen[-1][3]), {"name": "before", "include_memory": True})
        (child,) = s.fork()
        self.assertEqual(child.id, "s2")
        s.signal(7, 9)
        self.assertEqual(json.loads(Stub.seen[-1][3]), {"signal": 9})
        self.assertEqual([c.context_id for c in s.contexts()], ["c1"])
        self.assertEqual([e.verdict for e in s.egress(verdict="denied")], ["denied"])
        self.assertIn("verdict=denied", Stub.seen[-1][1])


class RetryTest(StubTest):
    def setUp(self):
        super().setUp()
        self.waits = []

    def client(self, **kw):
        al = airlock.Airlock(self.url, "key-1", **kw)
        al._sleep = self.waits.append
        return al

    def busy(self, after):
        return reply(503, {"type": "urn:airlock:problem:node-busy", "status": 503, "code": "unavailable"},
                     {"Retry-After": after})

    def test_no_retries_unless_asked(self):
        Stub.routes[("GET", "/v1/usage")] = sequence(self.busy("1"), reply(200, {"quotas": []}))
        with self.assertRaises(airlock.Unavailable):
            self.client().usage()
        self.assertEqual(self.waits, [])

    def test_retry_after_is_honoured(self):
        Stub.routes[("POST", "/v1/execute")] = sequence(
            reply(429, {"type": "urn:airlock:problem:rate-limited", "status": 429, "code": "rate_limited"},
                  {"Retry-After": "2"}),
            self.busy("3"),
            reply(200, {"execution_id": "e1", "status": "completed"}))
        r = self.client(retries=3).run("print(1)")
        self.assertEqual(r.execution_id, "e1")
        self.assertEqual(self.waits, [2.0, 3.0])
        self.assertEqual(len([s for s in Stub.seen if s[1] == "/v1/execute"]), 3)

    def test_gives_up_after_retries_and_on_long_waits(self):
        Stub.routes[("GET", "/v1/usage")] = self.busy("1")
        with self.assertRaises(airlock.Unavailable):
            self.client(retries=2).usage()
        self.assertEqual(self.waits, [1.0, 1.0])
        self.waits.clear()
        Stub.routes[("GET", "/v1/usage")] = self.busy("3600")
        with self.assertRaises(airlock.Unavailable) as ctx:
            self.client(retries=2, max_retry_wait=60).usage()
        self.assertEqual((self.waits, ctx.exception.retry_after), ([], 3600.0))

    def test_other_errors_are_not_retried(self):
        Stub.routes[("POST", "/v1/execute")] = reply(400, {"type": "urn:airlock:problem:unknown-language",
                                                           "status": 400, "code": "invalid"})
        with self.assertRaises(airlock.BadRequest):
            self.client(retries=3).run("x", language="cobol")
        self.assertEqual(self.waits, [])

    def test_a_stream_body_is_sent_once(self):
        import io
        Stub.routes[("POST", "/v1/sessions")] = reply(201, SESSION)
        Stub.routes[("PUT", "/v1/sessions/s1/files")] = self.busy("1")
        s = self.client(retries=3).session()
        # The stub answers 503 without reading the body, so the client
        # sees the 503 or a broken pipe: either way, one try only.
        with self.assertRaises((airlock.Unavailable, airlock.TransportError)):
            s.files.write("a.txt", io.BytesIO(b"data"))
        self.assertEqual(self.waits, [])
        self.assertEqual(len([x for x in Stub.seen if x[0] == "PUT"]), 1)

    def test_broken_connections_retried_for_idempotent_methods_only(self):
        al = airlock.Airlock("http://127.0.0.1:9", "k", retries=2)
        al._sleep = self.waits.append
        with self.assertRaises(airlock.TransportError):
            al.usage()
        self.assertEqual(len(self.waits), 2)
        self.waits.clear()
        with self.assertRaises(airlock.TransportError):
            al.run("print(1)")
        self.assertEqual(self.waits, [])

    def test_bad_settings(self):
        with self.assertRaises(ValueError):
            airlock.Airlock(self.url, "k", retries=-1)


class AsyncTest(StubTest):
    def test_async_client_runs_calls_concurrently(self):
        Stub.routes[("POST", "/v1/execute")] = reply(200, {"execution_id": "e1", "status": "completed"})
        Stub.routes[("POST", "/v1/sessions")] = reply(201, SESSION)
        Stub.routes[("DELETE", "/v1/sessions/s1")] = reply(200, dict(SESSION, state="ended"))
        Stub.routes[("PUT", "/v1/sessions/s1/files")] = reply(200, {"size": 2})
        Stub.routes[("GET", "/v1/executions")] = paged("executions", {
            "": ([{"execution_id": "e2"}], "c"), "c": ([{"execution_id": "e1"}], "")})

        async def main():
            async with airlock.AsyncAirlock(self.url, "key-1") as al:
                runs = await asyncio.gather(*(al.run("print(1)") for _ in range(4)))
                async with await al.session() as s:
                    n = await s.files.write("a", "hi")
                ids = [e.execution_id async for e in al.iter_executions(page_size=1)]
                return runs, n, ids, s

        runs, n, ids, s = asyncio.run(main())
        self.assertEqual([r.execution_id for r in runs], ["e1"] * 4)
        self.assertEqual((n, ids), (2, ["e2", "e1"]))
        self.assertTrue(s.sync.closed)
        self.assertIn(("DELETE", "/v1/sessions/s1"), [(m, p) for m, p, _, _ in Stub.seen])


class VersionTest(unittest.TestCase):
    def test_one_version_source(self):
        root = os.path.join(os.path.dirname(__file__), "..")
        with open(os.path.join(root, "pyproject.toml")) as f:
            pyproject = f.read()
        self.assertNotRegex(pyproject, r'(?m)^version\s*=\s*"')
        self.assertIn('attr = "airlock._version.__version__"', pyproject)
        self.assertRegex(airlock.__version__, r"^\d+\.\d+\.\d+$")
        from airlock import client
        self.assertEqual(client.USER_AGENT, "airlock-python/" + airlock.__version__)


if __name__ == "__main__":
    unittest.main()
