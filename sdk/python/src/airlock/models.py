"""Results of the Airlock API, as typed objects. Every object keeps the
server's JSON in ``raw``, so fields added later are not lost."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


def _s(d: Dict[str, Any], k: str) -> str:
    v = d.get(k)
    return v if isinstance(v, str) else ""


def _i(d: Dict[str, Any], k: str) -> int:
    v = d.get(k)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _b(d: Dict[str, Any], k: str) -> bool:
    return d.get(k) is True


@dataclass
class Artifact:
    """A file the program wrote; ``save`` or ``read`` fetches its bytes."""
    id: str
    filename: str
    size_bytes: int
    content_type: str
    sha256: str
    url: str
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)
    _client: Any = field(repr=False, default=None, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any], client: Any = None) -> "Artifact":
        return cls(_s(d, "artifact_id") or _s(d, "id"), _s(d, "filename"), _i(d, "size_bytes"), _s(d, "content_type"),
                   _s(d, "sha256"), _s(d, "url"), d, client)

    def read(self) -> bytes:
        """The artifact's bytes, checked against its size and SHA-256."""
        return self._client._artifact_bytes(self)

    def save(self, directory: str = ".") -> str:
        """Writes the artifact into ``directory`` under its base name; returns the path."""
        return self._client._save_artifact(self, directory)


@dataclass
class Execution:
    """One run: what came out and how (the execution record)."""
    execution_id: str
    status: str
    language: str
    exit_code: int
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: int
    peak_memory_mb: int
    timed_out: bool
    oom_killed: bool
    artifacts: List[Artifact]
    session_id: str = ""
    error: str = ""
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any], client: Any = None) -> "Execution":
        arts = d.get("artifacts") or []
        return cls(
            _s(d, "execution_id"), _s(d, "status"), _s(d, "language"), _i(d, "exit_code"),
            _s(d, "stdout"), _s(d, "stderr"), _b(d, "stdout_truncated"), _b(d, "stderr_truncated"),
            _i(d, "duration_ms"), (_i(d, "peak_memory_mib") or _i(d, "peak_memory_mb")), _b(d, "timed_out"), _b(d, "oom_killed"),
            [Artifact.from_json(a, client) for a in arts if isinstance(a, dict)],
            _s(d, "session_id"), _s(d, "error"), d)

    @property
    def ok(self) -> bool:
        """Whether the program exited 0."""
        return self.status == "completed" and self.exit_code == 0

    def save_artifacts(self, directory: str = ".") -> List[str]:
        """Saves every artifact into ``directory``; returns their paths."""
        return [a.save(directory) for a in self.artifacts]


@dataclass
class SessionInfo:
    """A session's record: state, limits, usage (``raw`` has all of it).
    It is data only; the live session you act on is ``airlock.Session``."""
    session_id: str
    state: str
    image: str
    size: str
    expires_at: str
    end_reason: str = ""
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SessionInfo":
        return cls(_s(d, "session_id"), _s(d, "state"), _s(d, "image"), _s(d, "size"),
                   _s(d, "expires_at"), _s(d, "end_reason"), d)


@dataclass
class FileEntry:
    """An entry of a session's directory."""
    name: str
    type: str
    size: int
    mode: str
    mtime: str

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileEntry":
        return cls(_s(d, "name"), _s(d, "type"), (_i(d, "size_bytes") or _i(d, "size")), _s(d, "mode"), _s(d, "modified_at") or _s(d, "mtime"))


@dataclass
class CellError:
    """The exception a cell raised."""
    name: str
    value: str
    traceback: str


@dataclass
class CellResult:
    """What a cell did: its text, its value, its figures, its exception."""
    context_id: str
    execution_id: str
    stdout: str
    stderr: str
    value: str
    error: Optional[CellError]
    outputs: List[Dict[str, str]]
    duration_ms: int
    timed_out: bool
    context_state: str
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CellResult":
        err = d.get("error")
        cell_err = CellError(_s(err, "name"), _s(err, "value"), _s(err, "traceback")) if isinstance(err, dict) else None
        outs = [o for o in (d.get("outputs") or []) if isinstance(o, dict)]
        return cls(_s(d, "context_id"), _s(d, "execution_id"), _s(d, "stdout"), _s(d, "stderr"),
                   _s(d, "value"), cell_err, outs, _i(d, "duration_ms"), _b(d, "timed_out"),
                   _s(d, "context_state"), d)

    @property
    def text(self) -> str:
        """The cell's stdout and its final value, as a reader would see them."""
        parts = [self.stdout] if self.stdout else []
        if self.value:
            parts.append(self.value + "\n")
        return "".join(parts)

    @property
    def images(self) -> List[bytes]:
        """Every figure the cell made, as PNG bytes."""
        out = []
        for o in self.outputs:
            if o.get("type") == "image/png":
                try:
                    out.append(base64.b64decode(o.get("data", ""), validate=True))
                except (binascii.Error, ValueError):
                    continue
        return out

    @property
    def html(self) -> List[str]:
        """The HTML forms of values that have one (a pandas DataFrame)."""
        return [o.get("data", "") for o in self.outputs if o.get("type") == "text/html"]


@dataclass
class Snapshot:
    """A saved session: its files, and its memory when asked for
    (``kind`` is ``files`` or ``memory``). Start a session from one with
    ``Airlock.session(from_snapshot=...)``."""
    snapshot_id: str
    session_id: str
    name: str
    kind: str
    image: str
    size_bytes: int
    sha256: str
    created_at: str
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Snapshot":
        size = _i(d, "size_bytes") or _i(d, "bytes")
        return cls(_s(d, "snapshot_id"), _s(d, "session_id"), _s(d, "name"), _s(d, "kind"),
                   _s(d, "image"), size, _s(d, "sha256"), _s(d, "created_at"), d)


@dataclass
class Volume:
    """A tenant's named disk that outlives sessions. ``mounts`` lists the
    live sessions that have it mounted (``session_id``, ``path``,
    ``read_only``); mount it with ``Airlock.session(volumes=[...])``."""
    name: str
    size_mib: int
    created_at: str
    mounts: List[Dict[str, Any]]
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Volume":
        mounts = d.get("mounts")
        return cls(_s(d, "name"), _i(d, "size_mib"), _s(d, "created_at"),
                   [m for m in mounts if isinstance(m, dict)] if isinstance(mounts, list) else [], d)


@dataclass
class VolumeSnapshot:
    """A sealed copy of a volume's files, kept by the server (encrypted
    under the tenant's key, like a session snapshot); it outlives the
    volume. Make a new volume from one with
    ``Airlock.create_volume(name, from_snapshot=...)``."""
    snapshot_id: str
    volume: str
    name: str
    size_mib: int
    size_bytes: int
    sha256: str
    entries: int
    created_at: str
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "VolumeSnapshot":
        return cls(_s(d, "snapshot_id"), _s(d, "volume"), _s(d, "name"), _i(d, "size_mib"), _i(d, "size_bytes"),
                   _s(d, "sha256"), _i(d, "entries"), _s(d, "created_at"), d)


@dataclass
class QuotaUsage:
    """One quota of the tenant: its limit, what is used and what is left
    in its window (``limit`` 0 is no limit)."""
    quota: str
    unit: str
    window: str
    limit: int
    used: int
    remaining: int
    resets_at: str = ""
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "QuotaUsage":
        return cls(_s(d, "quota"), _s(d, "unit"), _s(d, "window"), _i(d, "limit"), _i(d, "used"),
                   _i(d, "remaining"), _s(d, "resets_at"), d)


@dataclass
class Usage:
    """The tenant's quotas now, as ``GET /v1/usage`` says."""
    tenant_id: str
    at: str
    quotas: List[QuotaUsage]
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Usage":
        qs = [QuotaUsage.from_json(q) for q in d.get("quotas") or [] if isinstance(q, dict)]
        return cls(_s(d, "tenant_id"), _s(d, "at"), qs, d)

    def quota(self, name: str) -> Optional[QuotaUsage]:
        """The quota of that name, if the tenant has it."""
        for q in self.quotas:
            if q.quota == name:
                return q
        return None


@dataclass
class AbuseEvent:
    """What abuse detection saw and did (``action``: killed, quarantined, ...)."""
    event_id: str
    session_id: str
    execution_id: str
    detector: str
    summary: str
    action: str
    at: str
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "AbuseEvent":
        return cls(_s(d, "event_id") or _s(d, "id"), _s(d, "session_id"), _s(d, "execution_id"),
                   _s(d, "detector"), _s(d, "summary"), _s(d, "action"), _s(d, "occurred_at") or _s(d, "at") or _s(d, "time"), d)


@dataclass
class EgressEvent:
    """One connection or lookup of a sandbox, with the proxy's verdict."""
    seq: int
    kind: str
    name: str
    port: int
    verdict: str
    reason: str
    bytes_up: int
    bytes_down: int
    at: str
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "EgressEvent":
        return cls(_i(d, "seq"), _s(d, "kind"), _s(d, "name"), _i(d, "port"), _s(d, "verdict"),
                   _s(d, "reason"), _i(d, "up_bytes") or _i(d, "bytes_up"), _i(d, "down_bytes") or _i(d, "bytes_down"), _s(d, "occurred_at") or _s(d, "at") or _s(d, "time"), d)


@dataclass
class CodeContext:
    """A persistent interpreter's record (``state``: idle, busy, dead)."""
    context_id: str
    language: str
    state: str
    runs: int
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CodeContext":
        return cls(_s(d, "context_id"), _s(d, "language"), _s(d, "state"), _i(d, "runs"), d)


@dataclass
class Event:
    """One thing that happened to a tenant's session (``session.created``,
    ``session.paused``, ``session.resumed``, ``session.ended``,
    ``session.abuse_killed``) or an abuse decision (``abuse.detected``).
    ``id`` is stable and is the cursor to read on from."""
    id: str
    type: str
    session_id: str
    at: str
    reason: str
    detail: str
    data: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Event":
        data = d.get("data")
        return cls(_s(d, "id"), _s(d, "type"), _s(d, "session_id"), _s(d, "at"), _s(d, "reason"),
                   _s(d, "detail"), data if isinstance(data, dict) else {}, d)


@dataclass
class Webhook:
    """A URL that receives the tenant's events, signed with ``secret``
    (set only in the answer to ``create_webhook``: it is shown once)."""
    id: str
    url: str
    events: List[str]
    created_at: str
    secret: str
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Webhook":
        evs = d.get("events")
        return cls(_s(d, "webhook_id"), _s(d, "url"),
                   [e for e in evs if isinstance(e, str)] if isinstance(evs, list) else [],
                   _s(d, "created_at"), _s(d, "secret"), d)


@dataclass
class WebhookDelivery:
    """The sending of one event to one webhook: ``state`` is ``pending``,
    ``delivered`` or ``failed``."""
    id: str
    event_id: str
    event_type: str
    state: str
    attempts: int
    last_status: int
    last_error: str
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "WebhookDelivery":
        return cls(_s(d, "delivery_id"), _s(d, "event_id"), _s(d, "event_type"), _s(d, "state"),
                   _i(d, "attempts"), _i(d, "last_status"), _s(d, "last_error"), d)
