"""Airlock: run code that AI agents write in fresh, isolated sandboxes.

>>> from airlock import Airlock
>>> al = Airlock()                      # AIRLOCK_URL, AIRLOCK_API_KEY
>>> r = al.run("print(1 + 1)")
>>> r.stdout, r.exit_code
('2\\n', 0)
>>> with al.session(image="python-ds") as s:   # a Session; deleted at the end
...     s.files.write("data.csv", "x,y\\n1,2\\n")
...     s.exec("wc -l data.csv", on_stdout=print)
...     cell = s.context("python").run("import pandas as pd; pd.read_csv('data.csv').plot()")
...     cell.images                       # [b'\\x89PNG...']

Only the standard library is used.
"""

from ._version import __version__
from .aio import AsyncAirlock, AsyncSession
from .client import Airlock, Context, Files, Page, Session
from .errors import (AirlockError, BadRequest, Conflict, Forbidden, NotFound, NotSupported,
                     QuotaExceeded, ServerError, TooLarge, TransportError, Unauthorized,
                     Unavailable, Unprocessable)
from .models import (AbuseEvent, Artifact, CellError, CellResult, CodeContext, EgressEvent, Execution,
                     FileEntry, QuotaUsage, SessionInfo, Snapshot, Usage, Volume, VolumeSnapshot, Event, Webhook,
                     WebhookDelivery)


__all__ = [
    "__version__", "Airlock", "AsyncAirlock", "AsyncSession", "Session", "Files", "Context", "Page",
    "Execution", "Artifact", "SessionInfo", "FileEntry", "CellResult", "CellError",
    "Snapshot", "Volume", "VolumeSnapshot", "Usage", "QuotaUsage", "AbuseEvent", "EgressEvent", "CodeContext",
    "Event", "Webhook", "WebhookDelivery",
    "AirlockError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
    "TooLarge", "Unprocessable", "QuotaExceeded", "ServerError", "NotSupported",
    "Unavailable", "TransportError",
]
