"""Integration tests against a real Airlock server.

They run when AIRLOCK_URL and AIRLOCK_API_KEY name one (``go test
./e2e -run TestPythonSDK`` starts a real airlockd and sets them, with
AIRLOCK_TEST_OTHER_KEY, a key of another tenant, and a tenant limit of
one session at a time).
"""

import os
import sys
import tempfile
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import airlock  # noqa: E402

URL = os.environ.get("AIRLOCK_URL", "")
KEY = os.environ.get("AIRLOCK_API_KEY", "")
OTHER = os.environ.get("AIRLOCK_TEST_OTHER_KEY", "")
PNG = b"\x89PNG\r\n\x1a\n"

CHART = """import matplotlib.pyplot as plt
plt.figure(figsize=(6,3))
plt.plot([1,2,3,4],[10,25,18,35],color="#3b82f6")
plt.title("Agent Performance")
plt.savefig("output.png")
print("saved")"""


@unittest.skipUnless(URL and KEY, "AIRLOCK_URL and AIRLOCK_API_KEY name no server")
class ServerTest(unittest.TestCase):
    def setUp(self):
        self.al = airlock.Airlock(URL, KEY, agent_id="python-sdk-test")

    def test_one_shot_chart(self):
        r = self.al.run(CHART, language="python", timeout_sec=30)
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout, "saved\n")
        self.assertEqual([a.filename for a in r.artifacts], ["output.png"])
        with tempfile.TemporaryDirectory() as d:
            (path,) = r.save_artifacts(d)
            with open(path, "rb") as f:
                self.assertTrue(f.read().startswith(PNG))
        again = self.al.execution(r.execution_id)
        self.assertEqual((again.exit_code, again.raw.get("agent_id")), (0, "python-sdk-test"))

    def test_failing_program_is_a_result(self):
        r = self.al.run("echo out; echo err >&2; exit 7", language="bash")
        self.assertEqual((r.exit_code, r.stdout, r.stderr, r.ok), (7, "out\n", "err\n", False))

    def test_error_mapping(self):
        with self.assertRaises(airlock.BadRequest) as ctx:
            self.al.run("x", language="cobol")
        self.assertEqual((ctx.exception.type, ctx.exception.status), ("unknown-language", 400))
        with self.assertRaises(airlock.BadRequest) as ctx:
            self.al.run("x", language="bash", timeout_sec=100000)
        self.assertEqual(ctx.exception.type, "timeout-out-of-range")
        with self.assertRaises(airlock.Unauthorized):
            airlock.Airlock(URL, "not-a-key").run("x", language="bash")
        with self.assertRaises(airlock.NotFound):
            self.al.execution("0" * 32)

    def test_session(self):
        key = "py-" + uuid.uuid4().hex
        with self.al.session(image="python-ds", timeout_s=300, idempotency_key=key) as s:
            # The same key and arguments: the same session, not a second.
            self.assertIsInstance(s, airlock.Session)
            same = self.al.session(image="python-ds", timeout_s=300, idempotency_key=key)
            self.assertEqual(same.id, s.id)
            # The tenant may hold one session at a time here.
            with self.assertRaises(airlock.QuotaExceeded) as ctx:
                self.al.session(image="base")
            self.assertEqual(ctx.exception.type, "session-quota")
            self.assertGreater(ctx.exception.retry_after or 0, 0)
            if OTHER:
                with self.assertRaises(airlock.NotFound):
                    airlock.Airlock(URL, OTHER).attach(s.id)

            # Files.
            self.assertEqual(s.files.write("data.csv", "x,y\n1,10\n2,25\n3,18\n"), 19)
            s.files.write("blob.bin", b"\x00\x01\xff")
            names = {f.name: f for f in s.files.list()}
            self.assertEqual(names["data.csv"].size, 19)
            self.assertEqual(s.files.read("blob.bin"), b"\x00\x01\xff")
            with self.assertRaises(airlock.TooLarge):
                s.files.read("data.csv", max_bytes=10)
            with tempfile.TemporaryFile() as f:
                self.assertEqual(s.files.read_to("data.csv", f), 19)
                f.seek(0)
                self.assertEqual(f.read(), b"x,y\n1,10\n2,25\n3,18\n")
            s.files.remove("blob.bin")
            self.assertNotIn("blob.bin", {f.name for f in s.files.list()})
            with self.assertRaises(airlock.NotFound):
                s.files.read("blob.bin")
            with self.assertRaises(airlock.BadRequest):
                s.files.read("../etc/passwd")

            # A streamed exec: the callbacks get the output as it comes,
            # in more than one piece, before the result.
            pieces, errs = [], []
            stamps = []
            e = s.exec("for i in 1 2 3; do echo line $i; sleep 0.3; done; echo bad >&2; exit 2",
                       on_stdout=lambda t: (pieces.append(t), stamps.append(time.monotonic())),
                       on_stderr=errs.append)
            self.assertEqual("".join(pieces), "line 1\nline 2\nline 3\n")
            self.assertGreater(len(pieces), 1)
            self.assertGreater(stamps[-1] - stamps[0], 0.3)
            self.assertEqual(("".join(errs), e.exit_code, e.stdout), ("bad\n", 2, "line 1\nline 2\nline 3\n"))
            plain = s.exec(["wc", "-l", "data.csv"])
            self.assertEqual(plain.stdout.split()[0], "4")

            # A context with a figure.
            py = s.context("python")
            py.run("import pandas as pd\ndf = pd.read_csv('data.csv')")
            cell = py.run("import matplotlib.pyplot as plt\nplt.plot(df.x, df.y)\nint(df.y.sum())")
            self.assertEqual(cell.value, "53")
            self.assertEqual(len(cell.images), 1)
            self.assertTrue(cell.images[0].startswith(PNG))
            streamed = []
            cell = py.run("print('a'); print('b'); 1/0", on_stdout=streamed.append)
            self.assertEqual("".join(streamed), "a\nb\n")
            self.assertEqual(cell.error.name, "ZeroDivisionError")
            sid = s.id
        self.assertTrue(s.closed)
        final = self.al.get_session(sid)
        self.assertIsInstance(final, airlock.SessionInfo)
        self.assertEqual((final.state, final.end_reason), ("destroyed", "deleted"))
        with self.assertRaises(airlock.Conflict):
            airlock.Session(self.al, final).exec("true")

    def test_paging_usage_and_events(self):
        ids = [self.al.run(f"echo {i}", language="bash").execution_id for i in range(3)]
        page = self.al.executions(limit=1)
        self.assertEqual(len(page), 1)
        self.assertTrue(page.next_cursor)
        seen = []
        for e in self.al.iter_executions(page_size=1):
            seen.append(e.execution_id)
            if set(ids) <= set(seen):
                break
        self.assertTrue(set(ids) <= set(seen), (ids, seen))
        self.assertEqual(len(seen), len(set(seen)), "an execution came twice")
        # Newest first.
        self.assertEqual([x for x in seen if x in ids], list(reversed(ids)))
        u = self.al.usage()
        self.assertTrue(u.quotas)
        self.assertIsNotNone(u.quota("sessions"))
        self.assertIsInstance(list(self.al.iter_events()), list)

    def test_events_and_webhooks(self):
        # The cursor to read on from: the newest event before this test.
        cursor = ""
        for ev in self.al.events():
            cursor = ev.id
        with self.al.session(image="base", timeout_s=300) as s:
            sid = s.id
        # The session's events are written soon after its calls answer:
        # read the feed until both are there.
        seen = []
        deadline = time.time() + 60
        while time.time() < deadline:
            for ev in self.al.events(cursor=cursor, limit=2):
                cursor = ev.id
                if ev.session_id == sid:
                    seen.append(ev.type)
            if "session.ended" in seen:
                break
            time.sleep(0.2)  # polling a condition
        self.assertEqual(seen, ["session.created", "session.ended"])

        hook = self.al.create_webhook("https://hooks.example.com/airlock", events=["session.ended"])
        self.assertTrue(hook.secret.startswith("whsec_"), hook)
        self.assertEqual(hook.events, ["session.ended"])
        listed = [w for w in self.al.webhooks() if w.id == hook.id]
        self.assertEqual(len(listed), 1)
        self.assertEqual(listed[0].secret, "")
        with self.assertRaises(airlock.BadRequest):
            self.al.create_webhook("ftp://example.com/x")
        if OTHER:
            other = airlock.Airlock(URL, OTHER)
            self.assertEqual([w for w in other.webhooks() if w.id == hook.id], [])
            with self.assertRaises(airlock.NotFound):
                other.delete_webhook(hook.id)
            with self.assertRaises(airlock.BadRequest):
                list(other.events(cursor=cursor))
        self.assertEqual(self.al.webhook_deliveries(hook.id), [])
        self.al.delete_webhook(hook.id)
        with self.assertRaises(airlock.NotFound):
            self.al.delete_webhook(hook.id)
        with self.assertRaises(airlock.Unauthorized):
            list(airlock.Airlock(URL, "alk_notakey").events())

    def test_retry_after_with_a_real_quota(self):
        first = self.al.session(image="base")
        waits = []

        def wait(seconds):
            # The server's Retry-After, then the slot frees up.
            waits.append(seconds)
            first.close()

        al = airlock.Airlock(URL, KEY, retries=1, max_retry_wait=600)
        al._sleep = wait
        with al.session(image="base") as second:
            self.assertNotEqual(second.id, first.id)
        self.assertEqual(len(waits), 1)
        self.assertGreater(waits[0], 0)

    def test_snapshot_pause_resume(self):
        with self.al.session(image="python-ds", timeout_s=300) as s:
            s.files.write("keep.txt", "kept")
            ctx = s.context("python")
            ctx.run("x = 41")
            self.assertEqual(s.pause().state, "paused")
            self.assertEqual(s.resume().state, "ready")
            self.assertEqual(ctx.run("x + 1").value, "42")
            s.extend(200)
            self.assertEqual([c.context_id for c in s.contexts()], [ctx.id])
            snap = s.snapshot("py-sdk")
            self.assertEqual(self.al.get_snapshot(snap.snapshot_id).name, "py-sdk")
            self.assertIn(snap.snapshot_id, [x.snapshot_id for x in self.al.iter_snapshots()])
            self.assertEqual([e.kind for e in s.egress()], [])
        with self.al.session(from_snapshot=snap.snapshot_id) as again:
            self.assertEqual(again.files.read_text("keep.txt"), "kept")
        self.al.delete_snapshot(snap.snapshot_id)
        with self.assertRaises(airlock.NotFound):
            self.al.get_snapshot(snap.snapshot_id)

    def test_session_to_template(self):
        name = "py-" + uuid.uuid4().hex[:12]
        with self.al.session(image="base", timeout_s=300) as s:
            s.files.write("proj/notes.txt", "from the session")
            t = s.to_template(name)
            self.assertEqual((t["status"], t["source"], t["session_id"]), ("ready", "session", s.id))
        # The template outlives its session.
        with self.al.session(template=name) as again:
            self.assertEqual(again.files.read_text("proj/notes.txt"), "from the session")
        r = self.al.run("cat proj/notes.txt", language="bash", template=name)
        self.assertEqual(r.stdout, "from the session")
        self.al._json("DELETE", f"v1/templates/{name}")

    def test_async_client(self):
        import asyncio

        async def main():
            async with airlock.AsyncAirlock(URL, KEY) as al:
                runs = await asyncio.gather(*(al.run(f"echo {i}", language="bash") for i in range(3)))
                async with await al.session(image="base") as s:
                    await s.files.write("a.txt", "hi")
                    r = await s.exec("cat a.txt")
                return [x.stdout for x in runs], r.stdout

        outs, cat = asyncio.run(main())
        self.assertEqual(sorted(outs), ["0\n", "1\n", "2\n"])
        self.assertEqual(cat, "hi")


if __name__ == "__main__":
    unittest.main()
