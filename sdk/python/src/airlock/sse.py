"""Server-sent events, as the Airlock API streams execs, cells and watches."""

from __future__ import annotations

import base64
import binascii
import codecs
import json
from typing import IO, Any, Callable, Dict, Iterator, Optional, Tuple

from .errors import TransportError

MAX_LINE = 16 << 20  # one data line: an event carries at most one output chunk or a result


def events(stream: IO[bytes], max_line: int = MAX_LINE) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """Yields (event name, JSON object) for each event of a text/event-stream.

    Comments (keep-alives) and events without data are skipped; a data
    line that is not a JSON object, or a line longer than ``max_line``,
    raises TransportError.
    """
    name = "message"
    data: list = []
    while True:
        line = stream.readline(max_line + 1)
        if not line:
            return
        if len(line) > max_line:
            raise TransportError("an event of the stream is too large")
        line = line.rstrip(b"\r\n")
        if not line:
            if data:
                raw = b"\n".join(data)
                try:
                    obj = json.loads(raw.decode("utf-8"))
                except (ValueError, UnicodeDecodeError, RecursionError) as e:
                    raise TransportError(f"event {name!r} is not JSON: {e}") from None
                if not isinstance(obj, dict):
                    raise TransportError(f"event {name!r} is not a JSON object")
                yield name, obj
            name, data = "message", []
            continue
        if line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"event":
            name = value.decode("utf-8", "replace")
        elif field == b"data":
            data.append(value)


def chunk_bytes(ev: Dict[str, Any]) -> bytes:
    """The bytes of an output event: ``data`` (text) or ``data_b64``."""
    if "data_b64" in ev:
        try:
            return base64.b64decode(str(ev["data_b64"]), validate=True)
        except (binascii.Error, ValueError):
            raise TransportError("an output event has invalid base64") from None
    data = ev.get("data", "")
    return data.encode("utf-8") if isinstance(data, str) else b""


class TextSink:
    """Decodes one output stream's chunks as UTF-8 as they come (a character
    split between two chunks comes out whole) and calls a callback."""

    def __init__(self, callback: Optional[Callable[[str], Any]]) -> None:
        self._cb = callback
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, b: bytes) -> None:
        text = self._dec.decode(b)
        if text and self._cb is not None:
            self._cb(text)

    def close(self) -> None:
        text = self._dec.decode(b"", final=True)
        if text and self._cb is not None:
            self._cb(text)
