"""The Airlock client: one-shot runs, sessions, files and code contexts."""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from typing import IO, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, TypeVar, Union

from . import sse
from ._version import __version__
from .errors import AirlockError, TooLarge, TransportError, from_problem
from .models import (AbuseEvent, Artifact, CellResult, CodeContext, EgressEvent, Event, Execution, FileEntry,
                     SessionInfo, Snapshot, Usage, Volume, VolumeSnapshot, Webhook, WebhookDelivery)

__all__ = ["Airlock", "Session", "Files", "Context", "Page"]

DEFAULT_URL = "http://127.0.0.1:8080"
MAX_JSON = 64 << 20
MAX_PROBLEM = 64 << 10
MAX_READ = 64 << 20  # the most Files.read holds in memory unless told otherwise
COPY_CHUNK = 1 << 20
USER_AGENT = "airlock-python/" + __version__
# Statuses that say the server did not do the request and a later try may
# work: over a quota or rate (429), busy or starting (503).
RETRY_STATUSES = (429, 503)
# Methods that are safe to send again after the connection broke, when the
# server may or may not have seen them.
IDEMPOTENT = ("GET", "HEAD", "PUT", "DELETE")

T = TypeVar("T")

OutputCallback = Callable[[str], Any]


class Page(List[T]):
    """One page of a listing: a list, plus ``next_cursor``, the cursor of
    the next page ("" on the last). The ``iter_*`` methods follow it for
    you."""

    def __init__(self, items: Sequence[T] = (), next_cursor: str = "") -> None:
        super().__init__(items)
        self.next_cursor = next_cursor


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The API never redirects; following one could hand the key to another host."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[override]
        return None


class Airlock:
    """A client of one Airlock server.

    ``url`` and ``key`` default to the ``AIRLOCK_URL`` and ``AIRLOCK_API_KEY``
    environment variables (the URL to http://127.0.0.1:8080). ``timeout``
    is the most seconds to wait for one answer; a run's own timeout is added
    to it. Use it as a context manager, or just keep it around: it holds no
    connection between calls.

    >>> with Airlock() as al:
    ...     r = al.run("print(6 * 7)")
    ...     r.stdout
    '42\\n'
    """

    def __init__(self, url: Optional[str] = None, key: Optional[str] = None, *,
                 timeout: float = 120.0, agent_id: Optional[str] = None,
                 retries: int = 0, max_retry_wait: float = 60.0) -> None:
        url = url or os.environ.get("AIRLOCK_URL") or DEFAULT_URL
        key = key if key is not None else os.environ.get("AIRLOCK_API_KEY", "")
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"url must be an absolute http or https URL, not {url!r}")
        if u.query or u.fragment or "@" in u.netloc:
            raise ValueError("url must not have a query, a fragment or credentials")
        if any(c.isspace() or ord(c) < 0x20 for c in key):
            raise ValueError("the API key must not contain spaces or control characters")
        if agent_id is not None and (len(agent_id) > 200 or not all(0x20 <= ord(c) <= 0x7e for c in agent_id)):
            raise ValueError("agent_id must be at most 200 printable ASCII characters")
        self.url = url.rstrip("/") + "/"
        self.key = key
        self.timeout = timeout
        self.agent_id = agent_id
        if retries < 0 or max_retry_wait < 0:
            raise ValueError("retries and max_retry_wait must not be negative")
        # Opt-in retries: a 429 or 503 (the server did not do the request)
        # is tried again after the Retry-After it names, or a growing
        # back-off when it names none, at most max_retry_wait seconds a
        # wait; a broken connection only for idempotent methods.
        self.retries = retries
        self.max_retry_wait = max_retry_wait
        self._sleep: Callable[[float], Any] = time.sleep
        self._opener = urllib.request.build_opener(_NoRedirect())

    def __enter__(self) -> "Airlock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release; here for symmetry with sessions."""

    def __repr__(self) -> str:
        return f"Airlock({self.url!r})"

    # ---- HTTP ----

    def _request(self, method: str, path: str, **kw: Any):
        body = kw.get("body")
        # A stream can be sent once only.
        replayable = body is None or isinstance(body, (bytes, bytearray))
        attempt = 0
        while True:
            try:
                return self._request_once(method, path, **kw)
            except AirlockError as e:
                if attempt >= self.retries or not replayable:
                    raise
                if e.status in RETRY_STATUSES:
                    wait = e.retry_after if e.retry_after is not None else self._backoff(attempt)
                elif e.status == 0 and method in IDEMPOTENT and isinstance(e, TransportError):
                    wait = self._backoff(attempt)
                else:
                    raise
                if wait > self.max_retry_wait:
                    raise
                attempt += 1
                self._sleep(wait)

    @staticmethod
    def _backoff(attempt: int) -> float:
        """0.5 s, 1 s, 2 s, ... up to 30 s, with jitter."""
        return min(30.0, 0.5 * (2 ** attempt)) * (0.5 + random.random() / 2)

    def _request_once(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                 body: Union[bytes, IO[bytes], None] = None, json_body: Any = None,
                 headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
                 accept: str = "application/json, application/problem+json", length: Optional[int] = None):
        url = self.url + path.lstrip("/")
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        h = {"User-Agent": USER_AGENT, "Accept": accept}
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        data: Any = body
        if json_body is not None:
            data = json.dumps(json_body).encode("utf-8")
            h["Content-Type"] = "application/json"
        elif body is not None:
            h["Content-Type"] = "application/octet-stream"
            if length is not None:
                h["Content-Length"] = str(length)
        h.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=h)
        try:
            return self._opener.open(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            try:
                raw = e.read(MAX_PROBLEM + 1) if e.fp is not None else b""
            except OSError:
                raw = b""
            finally:
                e.close()
            raise from_problem(e.code, raw[:MAX_PROBLEM], e.headers or {}) from None
        except urllib.error.URLError as e:
            raise TransportError(f"cannot reach {self.url}: {e.reason}") from None
        except (OSError, ValueError) as e:
            raise TransportError(f"cannot reach {self.url}: {e}") from None

    def _json(self, method: str, path: str, **kw: Any) -> Dict[str, Any]:
        with self._request(method, path, **kw) as resp:
            try:
                raw = resp.read(MAX_JSON + 1)
            except OSError as e:
                raise TransportError(f"reading the answer: {e}") from None
        if len(raw) > MAX_JSON:
            raise TransportError("the answer is too large")
        if not raw:
            return {}
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise TransportError("the answer is not JSON") from None
        if not isinstance(obj, dict):
            raise TransportError("the answer is not a JSON object")
        return obj

    def _stream(self, path: str, body: Dict[str, Any], final: str, timeout: float,
                out: Optional[OutputCallback], err: Optional[OutputCallback],
                on_event: Optional[Callable[[str, Dict[str, Any]], Any]] = None) -> Dict[str, Any]:
        """Posts body with Accept: text/event-stream, feeds the output to the
        callbacks, and returns the data of the final event."""
        sinks = {"stdout": sse.TextSink(out), "stderr": sse.TextSink(err)}
        with self._request("POST", path, json_body=body, accept="text/event-stream, application/problem+json",
                           timeout=timeout) as resp:
            ctype = resp.headers.get("Content-Type", "")
            if not ctype.startswith("text/event-stream"):
                raise TransportError(f"expected an event stream, got {ctype!r}")
            try:
                for name, ev in sse.events(resp):
                    if name in sinks:
                        sinks[name].feed(sse.chunk_bytes(ev))
                    elif name == final:
                        for s in sinks.values():
                            s.close()
                        return ev
                    elif name == "error":
                        raise from_problem(_status(ev.get("status")), json.dumps(ev).encode(), {})
                    elif on_event is not None:
                        on_event(name, ev)
            except OSError as e:
                raise TransportError(f"the stream broke: {e}") from None
        raise TransportError(f"the stream ended without a {final} event (the run goes on; its record is kept)")

    # ---- one-shot ----

    def run(self, code: str, language: str = "python", *, timeout_sec: Optional[int] = None,
            allow_network: bool = False, image: Optional[str] = None,
            isolation: Optional[str] = None, template: Optional[str] = None) -> Execution:
        """Runs ``code`` once in a fresh sandbox and returns the result.

        A program that fails is a result (``exit_code``), not an exception;
        exceptions are for requests the server refused (``BadRequest`` for an
        unknown language, ``QuotaExceeded`` with ``retry_after``, ...).
        """
        body: Dict[str, Any] = {"language": language, "code": code}
        if timeout_sec:
            body["timeout_s"] = timeout_sec
        if allow_network:
            body["allow_network"] = True
        if image:
            body["image"] = image
        if isolation:
            body["isolation"] = isolation
        if template:
            body["template"] = template
        headers = {"X-Agent-Id": self.agent_id} if self.agent_id else None
        d = self._json("POST", "v1/execute", json_body=body, headers=headers,
                       timeout=self.timeout + (timeout_sec or 300))
        return Execution.from_json(d, self)

    def execution(self, execution_id: str) -> Execution:
        """One execution record of this key's tenant."""
        return Execution.from_json(self._json("GET", "v1/executions/" + _seg(execution_id)), self)

    def executions(self, limit: int = 50, before: Optional[str] = None) -> "Page[Execution]":
        """One page of the tenant's executions, newest first; pass its
        ``next_cursor`` as ``before`` for the next (or use
        ``iter_executions``)."""
        return self._page("v1/executions", "executions", {"limit": limit, "before": before},
                          lambda e: Execution.from_json(e, self))

    def iter_executions(self, page_size: int = 100) -> Iterator[Execution]:
        """Every execution of the tenant, newest first, a page at a time."""
        return self._iter(lambda cur: self.executions(page_size, cur))

    def execution_egress(self, execution_id: str, limit: int = 100,
                         before: Optional[str] = None) -> "Page[EgressEvent]":
        """The network connections and lookups of one execution."""
        return self._page(f"v1/executions/{_seg(execution_id)}/egress", "events",
                          {"limit": limit, "before": before}, EgressEvent.from_json)

    def usage(self) -> Usage:
        """The tenant's quotas and what is used of them now."""
        return Usage.from_json(self._json("GET", "v1/usage"))

    def abuse_events(self, limit: int = 50, before: Optional[str] = None) -> "Page[AbuseEvent]":
        """One page of the tenant's abuse events, newest first (what
        ``events(limit, before)`` was before the event feed)."""
        return self._page("v1/events", "events", {"limit": limit, "before": before}, AbuseEvent.from_json)

    def iter_abuse_events(self, page_size: int = 100) -> Iterator[AbuseEvent]:
        """Every abuse event of the tenant, newest first."""
        return self._iter(lambda cur: self.abuse_events(page_size, cur))

    def iter_events(self, page_size: int = 100) -> Iterator[AbuseEvent]:
        """Deprecated: ``iter_abuse_events``."""
        return self.iter_abuse_events(page_size)

    # ---- snapshots ----

    def snapshots(self, limit: int = 50, before: Optional[str] = None) -> "Page[Snapshot]":
        """One page of the tenant's snapshots, newest first."""
        return self._page("v1/snapshots", "snapshots", {"limit": limit, "before": before}, Snapshot.from_json)

    def iter_snapshots(self, page_size: int = 100) -> Iterator[Snapshot]:
        """Every snapshot of the tenant, newest first."""
        return self._iter(lambda cur: self.snapshots(page_size, cur))

    def get_snapshot(self, snapshot_id: str) -> Snapshot:
        """One snapshot's record."""
        return Snapshot.from_json(self._json("GET", "v1/snapshots/" + _seg(snapshot_id)))

    def delete_snapshot(self, snapshot_id: str) -> None:
        """Deletes a snapshot (its sealed blob too)."""
        with self._request("DELETE", "v1/snapshots/" + _seg(snapshot_id)):
            pass

    # ---- volumes ----

    def create_volume(self, name: str, size_mib: int = 0, *, from_snapshot: Optional[str] = None) -> Volume:
        """Makes a named volume of ``size_mib`` MiB (a hard limit) that
        outlives sessions; it counts against the tenant's volume_bytes
        quota (``QuotaExceeded`` past it, ``Conflict`` for a name taken).
        With ``from_snapshot`` (a volume snapshot's ID) it starts with the
        snapshot's files, and ``size_mib`` may be left out for the size of
        the volume the snapshot was taken of."""
        body: Dict[str, Any] = {"name": name}
        if size_mib:
            body["size_mib"] = size_mib
        if from_snapshot:
            body["from_snapshot"] = from_snapshot
        return Volume.from_json(self._json("POST", "v1/volumes", json_body=body))

    def volumes(self) -> List[Volume]:
        """The tenant's volumes, by name."""
        d = self._json("GET", "v1/volumes")
        return [Volume.from_json(x) for x in d.get("volumes") or [] if isinstance(x, dict)]

    def get_volume(self, name: str) -> Volume:
        """One of the tenant's volumes, with its mounts."""
        return Volume.from_json(self._json("GET", "v1/volumes/" + _seg(name)))

    def delete_volume(self, name: str) -> None:
        """Deletes a volume and its data (``Conflict`` while a session has
        it mounted)."""
        with self._request("DELETE", "v1/volumes/" + _seg(name)):
            pass

    def create_volume_snapshot(self, volume: str, name: Optional[str] = None) -> VolumeSnapshot:
        """Seals a copy of the volume's files. It is taken only while no
        session writes the volume (``Conflict``, volume-busy, otherwise);
        it counts against the tenant's snapshot quota."""
        body: Dict[str, Any] = {}
        if name:
            body["name"] = name
        return VolumeSnapshot.from_json(self._json("POST", "v1/volumes/" + _seg(volume) + "/snapshots", json_body=body))

    def volume_snapshots(self, volume: str) -> List[VolumeSnapshot]:
        """The volume's snapshots, newest first."""
        d = self._json("GET", "v1/volumes/" + _seg(volume) + "/snapshots")
        return [VolumeSnapshot.from_json(x) for x in d.get("snapshots") or [] if isinstance(x, dict)]

    def delete_volume_snapshot(self, volume: str, snapshot_id: str) -> None:
        """Deletes one of the volume's snapshots (its sealed blob too)."""
        with self._request("DELETE", "v1/volumes/" + _seg(volume) + "/snapshots/" + _seg(snapshot_id)):
            pass

    # ---- events and webhooks ----

    def events(self, cursor: Any = "", before: Optional[str] = None, *, limit: int = 50,
               follow: bool = False, poll: float = 2.0) -> Any:
        """The tenant's events, oldest first, after ``cursor`` (``""``: the
        oldest kept). The iterator reads page after page to the newest;
        with ``follow`` it then waits for new ones (asking every ``poll``
        seconds) for ever. Keep the last event's ``id`` to read on from
        it later (``events(cursor=ev.id)``).

        The old call ``events(limit, before)`` (an int first, or
        ``before``) still answers a page of abuse events, newest first:
        use ``abuse_events`` for that."""
        if isinstance(cursor, int) or before is not None:
            warnings.warn("events(limit, before) is deprecated: use abuse_events", DeprecationWarning, stacklevel=2)
            return self.abuse_events(cursor if isinstance(cursor, int) else 50, before)
        return self._feed(str(cursor), limit, follow, poll)

    def _feed(self, cursor: str, limit: int, follow: bool, poll: float) -> Iterator[Event]:
        while True:
            d = self._json("GET", "v1/events", query={"cursor": cursor, "limit": limit})
            evs = [Event.from_json(x) for x in d.get("events") or [] if isinstance(x, dict)]
            for ev in evs:
                yield ev
            nxt = d.get("next_cursor")
            if isinstance(nxt, str) and nxt:
                cursor = nxt
            if len(evs) >= limit:
                continue
            if not follow:
                return
            time.sleep(poll)

    def create_webhook(self, url: str, events: Optional[Sequence[str]] = None) -> Webhook:
        """Registers ``url`` for the tenant's events of the given types
        (none: every type). The answer's ``secret`` signs the deliveries
        and is shown this once."""
        body: Dict[str, Any] = {"url": url}
        if events:
            body["events"] = list(events)
        return Webhook.from_json(self._json("POST", "v1/webhooks", json_body=body))

    def webhooks(self) -> List[Webhook]:
        """The tenant's webhooks, oldest first, without their secrets."""
        d = self._json("GET", "v1/webhooks")
        return [Webhook.from_json(x) for x in d.get("webhooks") or [] if isinstance(x, dict)]

    def delete_webhook(self, webhook_id: str) -> None:
        """Removes a webhook and its pending deliveries."""
        with self._request("DELETE", "v1/webhooks/" + _seg(webhook_id)):
            pass

    def webhook_deliveries(self, webhook_id: str, limit: int = 50) -> List[WebhookDelivery]:
        """A webhook's delivery log, newest first."""
        d = self._json("GET", "v1/webhooks/" + _seg(webhook_id) + "/deliveries", query={"limit": limit})
        return [WebhookDelivery.from_json(x) for x in d.get("deliveries") or [] if isinstance(x, dict)]

    # ---- paging ----

    def _page(self, path: str, member: str, query: Dict[str, Any],
              make: Callable[[Dict[str, Any]], T]) -> "Page[T]":
        d = self._json("GET", path, query=query)
        cursor = d.get("next_cursor")
        return Page([make(x) for x in d.get(member) or [] if isinstance(x, dict)],
                    cursor if isinstance(cursor, str) else "")

    @staticmethod
    def _iter(fetch: Callable[[Optional[str]], "Page[T]"]) -> Iterator[T]:
        cursor: Optional[str] = None
        seen = set()
        while True:
            page = fetch(cursor)
            yield from page
            if not page.next_cursor or page.next_cursor in seen:
                return  # the last page, or a server that repeats a cursor
            seen.add(page.next_cursor)
            cursor = page.next_cursor

    def _artifact_bytes(self, a: Artifact) -> bytes:
        with self._request("GET", "v1/artifacts/" + _seg(a.id), accept="*/*") as resp:
            data = resp.read(a.size_bytes + 1 if a.size_bytes else MAX_JSON + 1)
        if a.size_bytes and len(data) != a.size_bytes:
            raise TransportError(f"artifact {a.filename!r}: got {len(data)} bytes, want {a.size_bytes}")
        if a.sha256 and hashlib.sha256(data).hexdigest() != a.sha256.lower():
            raise TransportError(f"artifact {a.filename!r}: checksum mismatch")
        return data

    def _save_artifact(self, a: Artifact, directory: str) -> str:
        name = os.path.basename(a.filename.replace("\\", "/").rstrip("/"))
        if name in ("", ".", ".."):
            raise ValueError(f"artifact name {a.filename!r} cannot be saved")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name)
        data = self._artifact_bytes(a)
        tmp = path + ".part"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return path

    # ---- sessions ----

    def session(self, image: Optional[str] = None, *, size: Optional[str] = None,
                timeout_s: Optional[int] = None, idle_timeout_s: Optional[int] = None,
                network: Optional[Dict[str, Any]] = None, broker_scopes: Optional[Sequence[str]] = None,
                isolation: Optional[str] = None, idempotency_key: Optional[str] = None,
                from_snapshot: Optional[str] = None, template: Optional[str] = None,
                volumes: Optional[Sequence[Mapping[str, Any]]] = None) -> "Session":
        """Creates a session: one sandbox for many calls, returned as a
        ``Session``. Use it in a ``with`` block, which deletes it at the end
        (also when the block raises); else call ``close()``::

            with al.session(image="python-ds") as s:
                s.exec("python3 -V")

        With ``idempotency_key``, a retry with the same key and arguments gets
        the same session instead of a second one. With ``from_snapshot`` (a
        snapshot ID), the session starts from that snapshot. With ``template``
        (a template's name: the tenant's own, else the operator's), the
        session starts from that template instead of an image. ``volumes``
        mounts the tenant's volumes: ``[{"name": "data", "path": "/workspace/data",
        "read_only": False}]`` (one writer per volume: a second is
        ``Conflict``).
        """
        body: Dict[str, Any] = {}
        for k, v in (("image", image), ("size", size), ("timeout_s", timeout_s),
                     ("idle_timeout_s", idle_timeout_s), ("network", network), ("isolation", isolation),
                     ("from_snapshot", from_snapshot), ("template", template)):
            if v is not None:
                body[k] = v
        if broker_scopes:
            body["broker_scopes"] = list(broker_scopes)
        if volumes:
            body["volumes"] = [dict(v) for v in volumes]
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        d = self._json("POST", "v1/sessions", json_body=body, headers=headers, timeout=self.timeout + 120)
        return Session(self, SessionInfo.from_json(d))

    def attach(self, session_id: str) -> "Session":
        """An existing session of this tenant, to act on (and, in a ``with``
        block, delete at the end)."""
        return Session(self, self.get_session(session_id))

    def get_session(self, session_id: str) -> SessionInfo:
        """A session's record."""
        return SessionInfo.from_json(self._json("GET", "v1/sessions/" + _seg(session_id)))

    def session_metrics(self, session_id: str, start: Any = None, end: Any = None) -> List[Dict[str, Any]]:
        """A session's resource samples, oldest first: dicts with at,
        cpu_pct (percent of its CPU limit), memory_bytes, disk_bytes,
        net_rx_bytes and net_tx_bytes. start and end (inclusive, optional)
        are RFC 3339 strings or aware datetimes."""
        q = {"start": _rfc3339(start), "end": _rfc3339(end)}
        return list(self._json("GET", f"v1/sessions/{_seg(session_id)}/metrics", query=q).get("samples") or [])

    def sessions(self, live: bool = True, limit: int = 50, before: Optional[str] = None) -> "Page[SessionInfo]":
        """One page of the tenant's sessions' records, newest first."""
        return self._page("v1/sessions", "sessions",
                          {"state": "live" if live else "all", "limit": limit, "before": before},
                          SessionInfo.from_json)

    def iter_sessions(self, live: bool = True, page_size: int = 100) -> Iterator[SessionInfo]:
        """Every session record of the tenant (live ones, or all), newest first."""
        return self._iter(lambda cur: self.sessions(live, page_size, cur))


class Session:
    """A live session, as ``Airlock.session`` makes it: ``exec``, ``files``,
    ``context``. It is a context manager: leaving the ``with`` block
    deletes the session (its sandbox and files), as ``close`` does.
    ``info`` is its record (a ``SessionInfo``) as last read."""

    def __init__(self, client: Airlock, info: SessionInfo) -> None:
        self._c = client
        self.info = info
        self.id = info.session_id
        self.files = Files(client, self.id)
        self._closed = False

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called (the ``with`` block was left)."""
        return self._closed

    def close(self) -> Optional[SessionInfo]:
        """Deletes the session (its sandbox and files); returns its final record.
        A session that is already gone is not an error."""
        if self._closed:
            return None
        self._closed = True
        from .errors import Conflict, NotFound
        try:
            return SessionInfo.from_json(self._c._json("DELETE", "v1/sessions/" + _seg(self.id)))
        except (NotFound, Conflict):
            return None

    def refresh(self) -> SessionInfo:
        """The session's record now (state, usage, what is running)."""
        self.info = self._c.get_session(self.id)
        return self.info

    def exec(self, command: Union[str, Sequence[str]], *, env: Optional[Mapping[str, str]] = None,
             cwd: Optional[str] = None, stdin: Optional[str] = None, timeout_sec: Optional[int] = None,
             on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None) -> Execution:
        """Runs a command: a string is a bash command line, a list an argv.

        With ``on_stdout`` or ``on_stderr``, the output is streamed to them as
        it comes (server-sent events); the result is returned at the end
        either way. A failing command is a result with its exit code.
        """
        body: Dict[str, Any] = {"shell": command} if isinstance(command, str) else {"cmd": list(command)}
        if env:
            body["env"] = dict(env)
        if cwd:
            body["cwd"] = cwd
        if stdin is not None:
            body["stdin"] = stdin
        if timeout_sec:
            body["timeout_s"] = timeout_sec
        path = f"v1/sessions/{_seg(self.id)}/exec"
        wait = self._c.timeout + (timeout_sec or 3600)
        if on_stdout is None and on_stderr is None:
            return Execution.from_json(self._c._json("POST", path, json_body=body, timeout=wait), self._c)
        return Execution.from_json(self._c._stream(path, body, "exit", wait, on_stdout, on_stderr), self._c)

    def signal(self, pid: int, signal: Union[int, str] = 15) -> None:
        """Sends a signal to a running exec of the session (its ``pid`` as
        the session's record lists it)."""
        with self._c._request("POST", f"v1/sessions/{_seg(self.id)}/exec/{int(pid)}/signal",
                              json_body={"signal": signal}):
            pass

    def extend(self, timeout_s: int) -> SessionInfo:
        """Sets the session's time left to ``timeout_s`` seconds from now."""
        self.info = SessionInfo.from_json(self._c._json("POST", f"v1/sessions/{_seg(self.id)}/timeout",
                                                        json_body={"timeout_s": timeout_s}))
        return self.info

    def set_network(self, mode: str, allow: Optional[Sequence[str]] = None) -> SessionInfo:
        """Changes the session's network policy (``none`` or ``allowlist``
        with ``allow`` hosts) for its next connections."""
        body: Dict[str, Any] = {"mode": mode}
        if allow is not None:
            body["allow"] = list(allow)
        self.info = SessionInfo.from_json(self._c._json("PUT", f"v1/sessions/{_seg(self.id)}/network",
                                                        json_body=body))
        return self.info

    def metrics(self, start: Any = None, end: Any = None) -> List[Dict[str, Any]]:
        """The session's resource samples, oldest first (Airlock.session_metrics)."""
        return self._c.session_metrics(self.id, start, end)

    def egress(self, limit: int = 100, before: Optional[str] = None, *, kind: Optional[str] = None,
               verdict: Optional[str] = None) -> "Page[EgressEvent]":
        """One page of the session's egress log, newest first."""
        return self._c._page(f"v1/sessions/{_seg(self.id)}/egress", "events",
                             {"limit": limit, "before": before, "kind": kind, "verdict": verdict},
                             EgressEvent.from_json)

    def snapshot(self, name: Optional[str] = None, *, include_memory: bool = False) -> Snapshot:
        """Saves the session (its files; its memory too when asked) as a
        sealed snapshot, and returns it. The session goes on."""
        body: Dict[str, Any] = {}
        if name:
            body["name"] = name
        if include_memory:
            body["include_memory"] = True
        return Snapshot.from_json(self._c._json("POST", f"v1/sessions/{_seg(self.id)}/snapshots",
                                                json_body=body, timeout=self._c.timeout + 600))

    def pause(self) -> SessionInfo:
        """Pauses the session: its sandbox is saved and its CPU and memory
        freed until ``resume``."""
        self.info = SessionInfo.from_json(self._c._json("POST", f"v1/sessions/{_seg(self.id)}/pause",
                                                        timeout=self._c.timeout + 600))
        return self.info

    def resume(self) -> SessionInfo:
        """Resumes a paused session where it was."""
        self.info = SessionInfo.from_json(self._c._json("POST", f"v1/sessions/{_seg(self.id)}/resume",
                                                        timeout=self._c.timeout + 600))
        return self.info

    def fork(self, count: int = 1, *, include_memory: bool = False) -> List["Session"]:
        """New sessions that start as copies of this one (its files; its
        memory too when asked). Each is a ``Session`` to close."""
        body: Dict[str, Any] = {"count": count}
        if include_memory:
            body["include_memory"] = True
        d = self._c._json("POST", f"v1/sessions/{_seg(self.id)}/fork", json_body=body,
                          timeout=self._c.timeout + 600)
        return [Session(self._c, SessionInfo.from_json(x)) for x in d.get("sessions") or [] if isinstance(x, dict)]

    def to_template(self, name: str, *, include_memory: bool = False, wait: bool = True,
                    wait_timeout: float = 600.0) -> Dict[str, Any]:
        """Makes a template of this session, private to the tenant
        (``POST /v1/sessions/{id}/template``): its files (the workspace, on
        the session's image) and, with ``include_memory``, its processes and
        code contexts, restored and reseeded in every session started from
        it (one-shot runs use its files only). The session goes on. Returns
        the template's record (``GET /v1/templates/{name}``); with ``wait``
        (the default) once its build has ended, raising ``AirlockError`` if
        it failed. Start from it with ``session(template=name)`` or
        ``run(..., template=name)``."""
        body: Dict[str, Any] = {"name": name}
        if include_memory:
            body["include_memory"] = True
        t = self._c._json("POST", f"v1/sessions/{_seg(self.id)}/template", json_body=body,
                          timeout=self._c.timeout + 600)
        deadline = time.monotonic() + wait_timeout
        while wait and t.get("status") == "building":
            if time.monotonic() > deadline:
                raise AirlockError(f"template {name} still building after {wait_timeout:.0f} s", status=0)
            time.sleep(0.25)
            t = self._c._json("GET", f"v1/templates/{_seg(name)}")
        if wait and t.get("status") == "failed":
            raise AirlockError(f"template {name} failed: {t.get('reason', '')}", status=0,
                               type="template-failed", detail=str(t.get("reason", "")))
        return t

    def contexts(self) -> List[CodeContext]:
        """The session's persistent interpreters."""
        d = self._c._json("GET", f"v1/sessions/{_seg(self.id)}/contexts")
        return [CodeContext.from_json(x) for x in d.get("contexts") or [] if isinstance(x, dict)]

    def context(self, language: str = "python") -> "Context":
        """Starts a persistent interpreter (``python`` or ``node``) in the session."""
        d = self._c._json("POST", f"v1/sessions/{_seg(self.id)}/contexts", json_body={"language": language})
        return Context(self._c, self.id, str(d.get("context_id", "")), language)


class Files:
    """The files of a session: paths relative to /workspace, or absolute
    under /workspace or /tmp."""

    def __init__(self, client: Airlock, session_id: str) -> None:
        self._c = client
        self._path = f"v1/sessions/{_seg(session_id)}/files"

    def write(self, path: str, data: Union[bytes, str, IO[bytes]]) -> int:
        """Creates or replaces a file (str is written as UTF-8); returns its size."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        length = len(data) if isinstance(data, (bytes, bytearray)) else None
        d = self._c._json("PUT", self._path, query={"path": path}, body=data, length=length,
                          timeout=self._c.timeout + 600)
        return int(d.get("size_bytes", d.get("size", 0)))

    def read(self, path: str, max_bytes: int = MAX_READ) -> bytes:
        """A file's bytes, held in memory: at most ``max_bytes`` (64 MiB by
        default). A larger file raises ``TooLarge`` (``status`` 0: the
        limit is this call's, not the server's) before its bytes are read;
        use ``read_to`` to stream it to a file instead."""
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        with self._open(path) as resp:
            size = _content_length(resp)
            if size is not None and size > max_bytes:
                raise TooLarge(f"{path!r} is {size} bytes, over max_bytes={max_bytes}; use files.read_to",
                               type="read-too-large")
            try:
                data = resp.read(max_bytes + 1)
            except OSError as e:
                raise TransportError(f"reading {path!r}: {e}") from None
        if len(data) > max_bytes:
            raise TooLarge(f"{path!r} is over max_bytes={max_bytes}; use files.read_to", type="read-too-large")
        if size is not None and len(data) != size:
            raise TransportError(f"reading {path!r}: got {len(data)} bytes, want {size} (the download was cut)")
        return data

    def read_to(self, path: str, dest: Union[IO[bytes], str, "os.PathLike[str]"]) -> int:
        """Streams a file of any size into ``dest``, a binary file object or
        a local path, in chunks of 1 MiB; returns the bytes written. A local
        path is written whole or not at all (through ``dest.part``, renamed
        at the end); a cut download raises ``TransportError``."""
        if isinstance(dest, (str, os.PathLike)):
            target = os.fspath(dest)
            tmp = target + ".part"
            try:
                with open(tmp, "wb") as f:
                    n = self.read_to(path, f)
                os.replace(tmp, target)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            return n
        n = 0
        with self._open(path) as resp:
            size = _content_length(resp)
            while True:
                try:
                    chunk = resp.read(COPY_CHUNK)
                except OSError as e:
                    raise TransportError(f"reading {path!r}: {e}") from None
                if not chunk:
                    break
                dest.write(chunk)
                n += len(chunk)
        if size is not None and n != size:
            raise TransportError(f"reading {path!r}: got {n} bytes, want {size} (the download was cut)")
        return n

    def read_text(self, path: str, max_bytes: int = MAX_READ) -> str:
        """A file as UTF-8 text (at most ``max_bytes``, as ``read``)."""
        return self.read(path, max_bytes).decode("utf-8")

    def _open(self, path: str):
        return self._c._request("GET", self._path, query={"path": path}, accept="*/*",
                                timeout=self._c.timeout + 600)

    def list(self, path: str = "") -> List[FileEntry]:
        """The entries of a directory (the workspace by default)."""
        d = self._c._json("GET", self._path, query={"list": 1, "path": path or None})
        return [FileEntry.from_json(e) for e in d.get("entries") or [] if isinstance(e, dict)]

    def remove(self, path: str) -> None:
        """Removes a file or an empty directory."""
        with self._c._request("DELETE", self._path, query={"path": path}):
            pass


class Context:
    """A persistent interpreter in a session: variables and imports survive
    between runs."""

    def __init__(self, client: Airlock, session_id: str, context_id: str, language: str) -> None:
        self._c = client
        self.session_id = session_id
        self.id = context_id
        self.language = language

    def __repr__(self) -> str:
        return f"Context({self.id!r}, {self.language!r})"

    def run(self, code: str, *, timeout_sec: Optional[int] = None,
            on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None) -> CellResult:
        """Runs a cell. The result has ``text`` (output and final value),
        ``images`` (every figure as PNG bytes) and ``error`` if it raised."""
        body: Dict[str, Any] = {"code": code}
        if timeout_sec:
            body["timeout_s"] = timeout_sec
        path = f"v1/sessions/{_seg(self.session_id)}/contexts/{_seg(self.id)}/run"
        wait = self._c.timeout + (timeout_sec or 3600)
        if on_stdout is None and on_stderr is None:
            return CellResult.from_json(self._c._json("POST", path, json_body=body, timeout=wait))
        return CellResult.from_json(self._c._stream(path, body, "result", wait, on_stdout, on_stderr))

    def restart(self) -> None:
        """Starts the interpreter afresh (its variables are gone)."""
        self._c._json("POST", f"v1/sessions/{_seg(self.session_id)}/contexts/{_seg(self.id)}/restart")

    def close(self) -> None:
        """Ends the interpreter."""
        with self._c._request("DELETE", f"v1/sessions/{_seg(self.session_id)}/contexts/{_seg(self.id)}"):
            pass


def _content_length(resp: Any) -> Optional[int]:
    v = resp.headers.get("Content-Length")
    if v is None or not v.strip().isdigit():
        return None
    return int(v)


def _status(v: Any) -> int:
    """The status member of an error event: an HTTP error status, else 500."""
    if isinstance(v, int) and not isinstance(v, bool) and 400 <= v <= 599:
        return v
    return 500


def _seg(s: str) -> str:
    """One path segment, escaped."""
    if not isinstance(s, str) or not s:
        raise ValueError("an ID is required")
    return urllib.parse.quote(s, safe="")


def _rfc3339(t: Any) -> Optional[str]:
    """t as an RFC 3339 string: None and strings as they are, datetimes
    formatted (a naive one is taken as UTC)."""
    if t is None or isinstance(t, str):
        return t
    if getattr(t, "tzinfo", 1) is None:
        return t.isoformat() + "Z"
    return t.isoformat()
