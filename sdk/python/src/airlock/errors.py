"""Typed exceptions built from the server's RFC 9457 problem documents."""

from __future__ import annotations

import json
import math
from email.utils import parsedate_to_datetime
from typing import Any, Dict, Mapping, Optional, Type

PROBLEM_PREFIX = "/problems/"
LEGACY_PROBLEM_PREFIX = "urn:airlock:problem:"  # servers before API 1.1.0
MAX_RETRY_AFTER = 24 * 3600.0


class AirlockError(Exception):
    """An error of the Airlock API, or of talking to it.

    ``status`` is the HTTP status (0 when no response came), ``type`` the
    problem's slug (``"session-quota"``), ``code`` Airlock's error code
    (``"rate_limited"``), ``detail`` the server's explanation and
    ``retry_after`` the seconds the server asked to wait before a retry
    (``None`` if it did not say).
    """

    def __init__(self, message: str, *, status: int = 0, type: str = "", title: str = "",
                 detail: str = "", code: str = "", instance: str = "",
                 retry_after: Optional[float] = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.code = code
        self.instance = instance
        self.retry_after = retry_after


class BadRequest(AirlockError):
    """400: the request is invalid (unknown language, bad path, ...)."""


class Unauthorized(AirlockError):
    """401: the API key is missing or wrong."""


class Forbidden(AirlockError):
    """403: not allowed (an isolation below the tenant's floor, no network, ...)."""


class NotFound(AirlockError):
    """404: no such execution, session, context or file for this key."""


class Conflict(AirlockError):
    """409: the thing is not in a state for this (a session that ended, a dead context)."""


class TooLarge(AirlockError):
    """413: code, a file or a request over its limit."""


class Unprocessable(AirlockError):
    """422: well-formed but refused (an idempotency key reused with another body)."""


class QuotaExceeded(AirlockError):
    """429: a quota or the tenant's share of the node; ``retry_after`` says when to retry."""


class ServerError(AirlockError):
    """500: the server failed."""


class NotSupported(AirlockError):
    """501: the server does not offer this (sessions or their network turned off)."""


class Unavailable(AirlockError):
    """503: the node is full, busy or stopping; ``retry_after`` says when to retry."""


class TransportError(AirlockError):
    """The server could not be reached, or its answer could not be read."""


_BY_CODE: Dict[str, Type[AirlockError]] = {
    "invalid": BadRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "too_large": TooLarge,
    "unprocessable": Unprocessable,
    "rate_limited": QuotaExceeded,
    "internal": ServerError,
    "not_implemented": NotSupported,
    "unavailable": Unavailable,
}

_BY_STATUS: Dict[int, Type[AirlockError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    413: TooLarge, 415: BadRequest, 422: Unprocessable, 429: QuotaExceeded, 500: ServerError,
    501: NotSupported, 502: Unavailable, 503: Unavailable, 504: Unavailable,
}


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Reads a Retry-After header: seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    import datetime as _dt
    now = _dt.datetime.now(when.tzinfo or _dt.timezone.utc)
    secs = (when - now).total_seconds()
    if math.isnan(secs):
        return None
    return min(max(secs, 0.0), MAX_RETRY_AFTER)


def _text(v: Any, limit: int = 2000) -> str:
    if not isinstance(v, str):
        return ""
    return "".join(c if c.isprintable() else "?" for c in v[:limit])


def _retry_member(v: Any) -> Optional[float]:
    """A problem document's ``retry_after`` member (seconds), if it is one."""
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        return parse_retry_after(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return min(max(float(v), 0.0), MAX_RETRY_AFTER)
    return None


def from_problem(status: int, body: bytes, headers: Mapping[str, str]) -> AirlockError:
    """Builds the exception a non-2xx response, or an ``error`` event of a
    stream, stands for.

    The problem document's ``code`` picks the class, else the status does.
    A body that is not a problem document still gives an error of the
    status's class. ``retry_after`` comes from the Retry-After header, or,
    where there is none (an error event of a stream has no headers of its
    own), from the document's ``retry_after`` member in seconds.
    """
    doc: Dict[str, Any] = {}
    try:
        parsed = json.loads(body.decode("utf-8", "replace")) if body else {}
        if isinstance(parsed, dict):
            doc = parsed
    except (ValueError, RecursionError):
        doc = {}
    code = _text(doc.get("code"), 100)
    slug = _text(doc.get("type"), 300)
    for prefix in (PROBLEM_PREFIX, LEGACY_PROBLEM_PREFIX):
        if slug.startswith(prefix):
            slug = slug[len(prefix):]
            break
    title = _text(doc.get("title"), 300)
    detail = _text(doc.get("detail"))
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else BadRequest
    retry = parse_retry_after(headers.get("Retry-After"))
    if retry is None:
        retry = _retry_member(doc.get("retry_after"))
    msg = detail or title or f"HTTP {status}"
    if slug:
        msg = f"{msg} ({slug}, HTTP {status})"
    else:
        msg = f"{msg} (HTTP {status})"
    return cls(msg, status=status, type=slug, title=title, detail=detail, code=code,
               instance=_text(doc.get("instance"), 300),
               retry_after=retry)
