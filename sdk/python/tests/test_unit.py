"""Unit tests of the SDK against a small HTTP server in this process."""

import io
import json
import os
import random
import sys
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import airlock  # noqa: E402
from airlock import errors, sse  # noqa: E402

EXECUTION = {
    "execution_id": "e1", "status": "completed", "language": "bash", "exit_code": 3,
    "stdout": "hi\n", "stderr": "", "stdout_truncated": False, "stderr_truncated": False,
    "duration_ms": 12, "peak_memory_mb": 4, "timed_out": False, "oom_killed": False,
    "artifacts": [{"id": "a1", "filename": "../../x.txt", "size_bytes": 5, "content_type": "text/plain",
                   "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", "url": "http://elsewhere/a1"}],
    "future_field": {"kept": True},
}


class Stub(BaseHTTPRequestHandler):
    """Answers by path; records every request."""

    routes = {}
    seen = []

    def log_message(self, *a):
        pass

    def _serve(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        Stub.seen.append((self.command, self.path, dict(self.headers), body))
        handler = Stub.routes.get((self.command, self.path.split("?")[0]))
        if handler is None:
            self.send_response(404)
            self.send_header("Content-Type", "application/problem+json")
            self.end_headers()
            self.wfile.write(b'{"type":"urn:airlock:problem:route-not-found","title":"Not Found","status":404,"detail":"no route","code":"not_found"}')
            return
        try:
            handler(self, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading (a capped read)

    do_GET = do_POST = do_PUT = do_DELETE = _serve


def reply(status, obj=None, headers=None, raw=None, ctype="application/json"):
    def h(req, body):
        req.send_response(status)
        req.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            req.send_header(k, v)
        data = raw if raw is not None else json.dumps(obj).encode()
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        req.wfile.write(data)
    return h


def stream(events):
    def h(req, body):
        req.send_response(200)
        req.send_header("Content-Type", "text/event-stream")
        req.end_headers()
        for e in events:
            req.wfile.write(e)
            req.wfile.flush()
    return h


class StubServerTest(unittest.TestCase):
    """The stub server on loopback, a fresh route table and a client for
    each test; no tests of its own (the other test modules share it)."""

    @classmethod
    def setUpClass(cls):
        cls.srv = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
        cls.thread = threading.Thread(target=cls.srv.serve_forever, daemon=True)
        cls.thread.start()
        cls.url = f"http://127.0.0.1:{cls.srv.server_address[1]}"

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()
        cls.thread.join()

    def setUp(self):
        Stub.routes = {}
        Stub.seen = []
        self.al = airlock.Airlock(self.url, "key-1", agent_id="unit")


class StubTest(StubServerTest):
    def test_run_sends_the_request_and_types_the_result(self):
        Stub.routes[("POST", "/v1/execute")] = reply(200, EXECUTION)
        r = self.al.run("echo hi; exit 3", language="bash", timeout_sec=5)
        self.assertEqual((r.exit_code, r.stdout, r.ok), (3, "hi\n", False))
        self.assertEqual(r.raw["future_field"], {"kept": True})
        method, path, headers, body = Stub.seen[0]
        self.assertEqual(headers["Authorization"], "Bearer key-1")
        self.assertEqual(headers["X-Agent-Id"], "unit")
        self.assertEqual(json.loads(body), {"language": "bash", "code": "echo hi; exit 3", "timeout_s": 5})

    def test_volumes(self):
        vol = {"name": "data", "tenant_id": "t", "size_mib": 64, "created_at": "2026-12-02T00:00:00Z",
               "mounts": [{"session_id": "s1", "path": "/mnt/data", "read_only": False}]}
        Stub.routes[("POST", "/v1/volumes")] = reply(201, vol)
        Stub.routes[("GET", "/v1/volumes")] = reply(200, {"volumes": [vol]})
        Stub.routes[("GET", "/v1/volumes/data")] = reply(200, vol)
        Stub.routes[("DELETE", "/v1/volumes/data")] = reply(409, {"type": "/problems/volume-in-use", "title": "Volume in use",
                                                                 "status": 409, "detail": "mounted", "code": "conflict"},
                                                             ctype="application/problem+json")
        v = self.al.create_volume("data", 64)
        self.assertEqual((v.name, v.size_mib, v.mounts[0]["session_id"]), ("data", 64, "s1"))
        self.assertEqual(json.loads(Stub.seen[-1][3]), {"name": "data", "size_mib": 64})
        self.assertEqual([x.name for x in self.al.volumes()], ["data"])
        self.assertEqual(self.al.get_volume("data").size_mib, 64)
        with self.assertRaises(airlock.Conflict):
            self.al.delete_volume("data")
        Stub.routes[("POST", "/v1/sessions")] = reply(400, {"type": "/problems/invalid-volume-path", "title": "x",
                                                            "status": 400, "detail": "bad", "code": "invalid"},
                                                      ctype="application/problem+json")
        with self.assertRaises(airlock.BadRequest):
            self.al.session(volumes=[{"name": "data", "path": "/proc", "read_only": True}])
        self.assertEqual(json.loads(Stub.seen[-1][3])["volumes"], [{"name": "data", "path": "/proc", "read_only": True}])

    def test_volume_snapshots(self):
        snap = {"snapshot_id": "vs1", "tenant_id": "t", "volume": "data", "name": "nightly", "size_mib": 64,
                "size_bytes": 1234, "sha256": "ab", "entries": 3, "created_at": "2026-12-02T00:00:00Z"}
        vol = {"name": "copy", "tenant_id": "t", "size_mib": 64, "created_at": "2026-12-02T00:00:00Z", "mounts": []}
        Stub.routes[("POST", "/v1/volumes/data/snapshots")] = reply(201, snap)
        Stub.routes[("GET", "/v1/volumes/data/snapshots")] = reply(200, {"snapshots": [snap]})
        Stub.routes[("DELETE", "/v1/volumes/data/snapshots/vs1")] = reply(204, raw=b"")
        Stub.routes[("POST", "/v1/volumes")] = reply(201, vol)
        s = self.al.create_volume_snapshot("data", name="nightly")
        self.assertEqual((s.snapshot_id, s.volume, s.size_mib, s.size_bytes, s.entries), ("vs1", "data", 64, 1234, 3))
        self.assertEqual(json.loads(Stub.seen[-1][3]), {"name": "nightly"})
        self.assertEqual([x.snapshot_id for x in self.al.volume_snapshots("data")], ["vs1"])
        v = self.al.create_volume("copy", from_snapshot="vs1")
        self.assertEqual(v.name, "copy")
        self.assertEqual(json.loads(Stub.seen[-1][3]), {"name": "copy", "from_snapshot": "vs1"})
        self.al.delete_volume_snapshot("data", "vs1")
        self.assertEqual(Stub.seen[-1][:2], ("DELETE", "/v1/volumes/data/snapshots/vs1"))

    def test_artifacts_saved_by_base_name_and_checked(self):
        Stub.routes[("POST", "/v1/execute")] = reply(200, EXECUTION)
        Stub.routes[("GET", "/v1/artifacts/a1")] = reply(200, raw=b"hello", ctype="text/plain")
        r = self.al.run("x")
        with tempfile.TemporaryDirectory() as d:
            paths = r.save_artifacts(d)
            self.assertEqual(paths, [os.path.join(d, "x.txt")])
            with open(paths[0], "rb") as f:
                self.assertEqual(f.read(), b"hello")
        # The owner's key at the API's own path, never the URL's host.
        self.assertEqual(Stub.seen[-1][1], "/v1/artifacts/a1")
        Stub.routes[("GET", "/v1/artifacts/a1")] = reply(200, raw=b"HELLO", ctype="text/plain")
        with self.assertRaises(airlock.TransportError):
            r.artifacts[0].read()

    def test_problems_become_typed_exceptions(self):
        cases = [
            (reply(429, {"type": "urn:airlock:problem:session-quota", "title": "Too Many Requests", "status": 429,
                         "detail": "full", "code": "rate_limited"}, {"Retry-After": "7"}), airlock.QuotaExceeded, 7.0, "session-quota"),
            (reply(503, {"type": "urn:airlock:problem:node-busy", "status": 503, "code": "unavailable"}, {"Retry-After": "2"}), airlock.Unavailable, 2.0, "node-busy"),
            (reply(400, {"type": "urn:airlock:problem:unknown-language", "status": 400, "detail": "no", "code": "invalid"}), airlock.BadRequest, None, "unknown-language"),
            (reply(403, {"type": "urn:airlock:problem:isolation-not-allowed", "status": 403, "code": "forbidden"}), airlock.Forbidden, None, "isolation-not-allowed"),
            (reply(502, raw=b"<html>bad gateway</html>", ctype="text/html"), airlock.Unavailable, None, ""),
            (reply(418, {"code": "made_up"}), airlock.BadRequest, None, ""),
            (reply(401, {"type": "urn:airlock:problem:unauthorized", "status": 401, "code": "unauthorized"}), airlock.Unauthorized, None, "unauthorized"),
        ]
        for handler, cls, retry, slug in cases:
            Stub.routes[("POST", "/v1/execute")] = handler
            with self.assertRaises(cls) as ctx:
                self.al.run("x")
            self.assertIsInstance(ctx.exception, airlock.AirlockError)
            self.assertEqual(ctx.exception.retry_after, retry)
            self.assertEqual(ctx.exception.type, slug)
        with self.assertRaises(airlock.NotFound):
            self.al.execution("nope")

    def test_session_idempotency_and_close(self):
        Stub.routes[("POST", "/v1/sessions")] = reply(201, {"session_id": "s1", "state": "ready"})
        Stub.routes[("DELETE", "/v1/sessions/s1")] = reply(200, {"session_id": "s1", "state": "destroyed", "end_reason": "deleted"})
        with self.al.session(image="base", timeout_s=60, idempotency_key="k-1") as s:
            self.assertEqual(s.id, "s1")
        create, delete = Stub.seen[0], Stub.seen[1]
        self.assertEqual(create[2]["Idempotency-Key"], "k-1")
        self.assertEqual(json.loads(create[3]), {"image": "base", "timeout_s": 60})
        self.assertEqual((delete[0], delete[1]), ("DELETE", "/v1/sessions/s1"))
        s.close()  # twice is fine
        self.assertEqual(len(Stub.seen), 2)

    def test_template_param(self):
        Stub.routes[("POST", "/v1/execute")] = reply(200, EXECUTION)
        Stub.routes[("POST", "/v1/sessions")] = reply(201, {"session_id": "s2", "state": "ready"})
        Stub.routes[("DELETE", "/v1/sessions/s2")] = reply(200, {"session_id": "s2", "state": "destroyed"})
        self.al.run("cat /app/x", language="bash", template="mine")
        self.assertEqual(json.loads(Stub.seen[0][3]), {"language": "bash", "code": "cat /app/x", "template": "mine"})
        with self.al.session(template="mine"):
            pass
        self.assertEqual(json.loads(Stub.seen[1][3]), {"template": "mine"})

    def test_session_to_template(self):
        Stub.routes[("POST", "/v1/sessions")] = reply(201, {"session_id": "s3", "state": "ready"})
        Stub.routes[("POST", "/v1/sessions/s3/template")] = reply(202, {"template_id": "t1", "name": "mine", "status": "building", "source": "session"})
        Stub.routes[("GET", "/v1/templates/mine")] = reply(200, {"template_id": "t1", "name": "mine", "status": "ready", "source": "session"})
        Stub.routes[("DELETE", "/v1/sessions/s3")] = reply(200, {"session_id": "s3", "state": "destroyed"})
        with self.al.session() as s:
            t = s.to_template("mine", include_memory=True)
        self.assertEqual(t["status"], "ready")
        self.assertEqual((Stub.seen[1][0], Stub.seen[1][1]), ("POST", "/v1/sessions/s3/template"))
        self.assertEqual(json.loads(Stub.seen[1][3]), {"name": "mine", "include_memory": True})
        self.assertEqual((Stub.seen[2][0], Stub.seen[2][1]), ("GET", "/v1/templates/mine"))
        Stub.routes[("GET", "/v1/templates/bad")] = reply(200, {"name": "bad", "status": "failed", "reason": "secret-in-image: a key"})
        Stub.routes[("POST", "/v1/sessions/s3/template")] = reply(202, {"name": "bad", "status": "building"})
        s2 = airlock.Session(self.al, airlock.SessionInfo.from_json({"session_id": "s3", "state": "ready"}))
        with self.assertRaises(airlock.AirlockError) as cm:
            s2.to_template("bad")
        self.assertIn("secret-in-image", str(cm.exception))

    def test_session_is_the_context_manager(self):
        Stub.routes[("POST", "/v1/sessions")] = reply(201, {"session_id": "s1", "state": "ready", "image": "base"})
        Stub.routes[("GET", "/v1/sessions/s1")] = reply(200, {"session_id": "s1", "state": "ready", "size": "small"})
        Stub.routes[("DELETE", "/v1/sessions/s1")] = reply(200, {"session_id": "s1", "state": "destroyed", "end_reason": "deleted"})
        s = self.al.session()
        self.assertIsInstance(s, airlock.Session)
        self.assertIsInstance(s.info, airlock.SessionInfo)
        self.assertEqual((s.info.image, repr(s)), ("base", "Session('s1')"))
        info = self.al.get_session("s1")
        self.assertIsInstance(info, airlock.SessionInfo)
        self.assertFalse(hasattr(info, "__enter__"))
        # Leaving the block by an exception still deletes the session.
        with self.assertRaises(KeyError):
            with s:
                self.assertFalse(s.closed)
                raise KeyError("boom")
        self.assertTrue(s.closed)
        self.assertEqual([(m, p) for m, p, _, _ in Stub.seen],
                         [("POST", "/v1/sessions"), ("GET", "/v1/sessions/s1"), ("DELETE", "/v1/sessions/s1")])
        with self.al.attach("s1") as again:
            self.assertIsInstance(again, airlock.Session)
            self.assertEqual(again.info.size, "small")
        self.assertEqual(Stub.seen[-1][:2], ("DELETE", "/v1/sessions/s1"))

    def test_files_read_is_bounded_and_read_to_streams(self):
        Stub.routes[("POST", "/v1/sessions")] = reply(201, {"session_id": "s1", "state": "ready"})
        s = self.al.session()
        blob = bytes(range(256)) * 8192  # 2 MiB
        Stub.routes[("GET", "/v1/sessions/s1/files")] = reply(200, raw=blob, ctype="application/octet-stream")
        self.assertEqual(s.files.read("big.bin"), blob)
        with self.assertRaises(airlock.TooLarge) as ctx:
            s.files.read("big.bin", max_bytes=1 << 20)
        self.assertEqual((ctx.exception.status, ctx.exception.type), (0, "read-too-large"))
        self.assertIn("read_to", str(ctx.exception))
        buf = io.BytesIO()
        self.assertEqual(s.files.read_to("big.bin", buf), len(blob))
        self.assertEqual(buf.getvalue(), blob)
        with tempfile.TemporaryDirectory() as d:
            dst = os.path.join(d, "big.bin")
            self.assertEqual(s.files.read_to("big.bin", dst), len(blob))
            with open(dst, "rb") as f:
                self.assertEqual(f.read(), blob)

        # Without a Content-Length the cap holds while reading.
        def unsized(req, body):
            req.send_response(200)
            req.send_header("Content-Type", "application/octet-stream")
            req.end_headers()
            req.wfile.write(blob)
        Stub.routes[("GET", "/v1/sessions/s1/files")] = unsized
        with self.assertRaises(airlock.TooLarge):
            s.files.read("big.bin", max_bytes=1000)
        self.assertEqual(s.files.read("big.bin"), blob)

        # A download cut short is an error, and leaves no file behind.
        def cut(req, body):
            req.send_response(200)
            req.send_header("Content-Type", "application/octet-stream")
            req.send_header("Content-Length", str(len(blob)))
            req.end_headers()
            req.wfile.write(blob[:1000])
        Stub.routes[("GET", "/v1/sessions/s1/files")] = cut
        with self.assertRaises(airlock.TransportError):
            s.files.read("big.bin")
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(airlock.TransportError):
                s.files.read_to("big.bin", os.path.join(d, "big.bin"))
            self.assertEqual(os.listdir(d), [])
        with self.assertRaises(ValueError):
            s.files.read("big.bin", max_bytes=-1)

    def test_streamed_exec_keeps_characters_whole(self):
        Stub.routes[("POST", "/v1/sessions")] = reply(201, {"session_id": "s1", "state": "ready"})
        # "é" is c3 a9: split between two chunks, each sent as base64.
        Stub.routes[("POST", "/v1/sessions/s1/exec")] = stream([
            b": keep-alive\n\n",
            b'event: start\ndata: {"execution_id":"e1","pid":3}\n\n',
            b'event: stdout\ndata: {"data":"h"}\n\n',
            b'event: stdout\ndata: {"data_b64":"ww=="}\n\n',
            b'event: stdout\ndata: {"data_b64":"qQ=="}\n\nevent: stderr\ndata: {"data":"warn\\n"}\n\n',
            b"event: exit\ndata: " + json.dumps(EXECUTION).encode() + b"\n\n",
        ])
        s = self.al.session()
        out, err = [], []
        e = s.exec(["sh", "-c", "x"], on_stdout=out.append, on_stderr=err.append)
        self.assertEqual("".join(out), "h\u00e9")
        self.assertEqual(err, ["warn\n"])
        self.assertEqual(e.exit_code, 3)
        self.assertEqual(Stub.seen[-1][2]["Accept"].split(",")[0], "text/event-stream")
        self.assertEqual(json.loads(Stub.seen[-1][3]), {"cmd": ["sh", "-c", "x"]})

    def test_stream_error_event_and_cut_stream(self):
        Stub.routes[("POST", "/v1/sessions")] = reply(201, {"session_id": "s1", "state": "ready"})
        s = self.al.session()
        Stub.routes[("POST", "/v1/sessions/s1/exec")] = stream([
            b'event: start\ndata: {"execution_id":"e1","pid":3}\n\n',
            b'event: error\ndata: {"type":"urn:airlock:problem:server-restarting","status":503,"code":"unavailable","detail":"restart"}\n\n',
        ])
        with self.assertRaises(airlock.Unavailable) as ctx:
            s.exec("x", on_stdout=print)
        self.assertEqual((ctx.exception.type, ctx.exception.retry_after), ("server-restarting", None))
        # An error event that says when to retry keeps it; a status that is
        # not an error status is taken as 500.
        for data, cls, retry in [
            (b'{"type":"urn:airlock:problem:store-busy","status":503,"code":"unavailable","retry_after":2}', airlock.Unavailable, 2.0),
            (b'{"type":"urn:airlock:problem:session-quota","status":429,"code":"rate_limited","retry_after":"7"}', airlock.QuotaExceeded, 7.0),
            (b'{"status":"soon","retry_after":true}', airlock.ServerError, None),
            (b'{"status":200,"retry_after":1e400}', airlock.ServerError, None),
            (b'{"status":99999999999999999999,"retry_after":-3}', airlock.ServerError, 0.0),
        ]:
            Stub.routes[("POST", "/v1/sessions/s1/exec")] = stream([b"event: error\ndata: " + data + b"\n\n"])
            with self.assertRaises(cls) as ctx:
                s.exec("x", on_stdout=print)
            self.assertEqual(ctx.exception.retry_after, retry, data)
        Stub.routes[("POST", "/v1/sessions/s1/exec")] = stream([b'event: stdout\ndata: {"data":"x"}\n\n'])
        with self.assertRaises(airlock.TransportError):
            s.exec("x", on_stdout=lambda t: None)

    def test_redirects_are_not_followed(self):
        seen_elsewhere = []
        other = ThreadingHTTPServer(("127.0.0.1", 0), type("Other", (Stub,), {
            "_serve": lambda self: (seen_elsewhere.append(dict(self.headers)), self.send_response(200), self.end_headers()),
            "do_GET": lambda self: self._serve(), "do_POST": lambda self: self._serve()}))
        t = threading.Thread(target=other.serve_forever, daemon=True)
        t.start()
        try:
            Stub.routes[("POST", "/v1/execute")] = reply(307, {}, {"Location": f"http://127.0.0.1:{other.server_address[1]}/steal"})
            with self.assertRaises(airlock.AirlockError):
                self.al.run("x")
            self.assertEqual(seen_elsewhere, [])
        finally:
            other.shutdown()
            other.server_close()
            t.join()

    def test_config_from_environment(self):
        old = dict(os.environ)
        try:
            os.environ["AIRLOCK_URL"] = self.url + "/"
            os.environ["AIRLOCK_API_KEY"] = "env-key"
            al = airlock.Airlock()
            self.assertEqual((al.url, al.key), (self.url + "/", "env-key"))
        finally:
            os.environ.clear()
            os.environ.update(old)
        for bad in ["ftp://x", "http://", "http://u:p@host", "http://h/?q=1"]:
            with self.assertRaises(ValueError):
                airlock.Airlock(bad, "k")
        with self.assertRaises(ValueError):
            airlock.Airlock(self.url, "two words")

    def test_unreachable_server(self):
        al = airlock.Airlock("http://127.0.0.1:1", "k", timeout=5)
        with self.assertRaises(airlock.TransportError):
            al.run("x")


class ParserTest(unittest.TestCase):
    def test_retry_after(self):
        self.assertEqual(errors.parse_retry_after("30"), 30.0)
        self.assertEqual(errors.parse_retry_after("99999999"), errors.MAX_RETRY_AFTER)
        self.assertIsNone(errors.parse_retry_after("soon"))
        self.assertIsNone(errors.parse_retry_after(""))
        self.assertEqual(errors.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), 0.0)

    def test_cell_result(self):
        c = airlock.CellResult.from_json({"stdout": "a\n", "value": "42", "outputs": [
            {"type": "image/png", "data": "iVBORw0KGgo="}, {"type": "image/png", "data": "!!"},
            {"type": "text/html", "data": "<table>"}], "error": {"name": "E", "value": "v", "traceback": "t"}})
        self.assertEqual(c.text, "a\n42\n")
        self.assertEqual(c.images, [b"\x89PNG\r\n\x1a\n"])
        self.assertEqual(c.html, ["<table>"])
        self.assertEqual(c.error.name, "E")

    def test_hostile_bytes_never_escape_as_other_errors(self):
        rng = random.Random(1)
        samples = [b"event: x\ndata: [1]\n\n", b"data: {\n\n", b"data: " + b"{" * 5000 + b"\n\n",
                   b"data: \xff\xfe\n\n", b"event: stdout\ndata: {\"data_b64\": \"%%%\"}\n\n"]
        for _ in range(300):
            n = rng.randint(0, 200)
            samples.append(bytes(rng.choice(b"event: data{}\"\n\r:\\x0\xff ") for _ in range(n)))
        for s in samples:
            try:
                for name, ev in sse.events(io.BytesIO(s), max_line=1 << 16):
                    self.assertIsInstance(ev, dict)
                    if name in ("stdout", "stderr"):
                        sse.chunk_bytes(ev)
            except airlock.TransportError:
                pass
            e = errors.from_problem(rng.choice([400, 404, 429, 500, 503, 599]), s, {"Retry-After": s[:20].decode("latin-1")})
            self.assertIsInstance(e, airlock.AirlockError)
            self.assertTrue(e.detail.isprintable() or e.detail == "")


if __name__ == "__main__":
    unittest.main()
