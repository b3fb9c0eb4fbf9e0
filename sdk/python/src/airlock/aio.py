"""An asyncio client: the same API as ``Airlock``, with every call a
coroutine.

It is a thin layer over the blocking client: each call runs in a worker
thread (``asyncio.to_thread``), so the SDK keeps to the standard library
and both clients share one implementation (errors, retries, limits).
Calls of one ``AsyncAirlock`` may run concurrently.

>>> async with AsyncAirlock() as al:
...     r = await al.run("print(1)")
...     async with await al.session(image="python-ds") as s:
...         await s.exec("ls")
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Callable, Iterator, List, Optional, TypeVar

from .client import Airlock, Context, Files, Session
from .models import SessionInfo

__all__ = ["AsyncAirlock", "AsyncSession", "AsyncFiles", "AsyncContext"]

T = TypeVar("T")


async def _call(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    return await asyncio.to_thread(functools.partial(fn, *args, **kw))


async def _aiter(make: Callable[[], Iterator[T]]) -> AsyncIterator[T]:
    """An async iterator over a blocking one; each step runs in a thread."""
    it = await _call(make)
    done = object()
    while True:
        item = await _call(next, it, done)
        if item is done:
            return
        yield item  # type: ignore[misc]


class AsyncAirlock:
    """``Airlock`` with coroutines: the same arguments (``url``, ``key``,
    ``timeout``, ``agent_id``, ``retries``, ``max_retry_wait``), the same
    methods, the same exceptions. ``iter_*`` methods are async iterators."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.sync = Airlock(*args, **kw)

    async def __aenter__(self) -> "AsyncAirlock":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.sync.close()

    def __repr__(self) -> str:
        return f"AsyncAirlock({self.sync.url!r})"

    async def run(self, *args: Any, **kw: Any):
        return await _call(self.sync.run, *args, **kw)

    async def execution(self, execution_id: str):
        return await _call(self.sync.execution, execution_id)

    async def executions(self, *args: Any, **kw: Any):
        return await _call(self.sync.executions, *args, **kw)

    def iter_executions(self, page_size: int = 100):
        return _aiter(lambda: self.sync.iter_executions(page_size))

    async def execution_egress(self, *args: Any, **kw: Any):
        return await _call(self.sync.execution_egress, *args, **kw)

    async def usage(self):
        return await _call(self.sync.usage)

    async def events(self, *args: Any, **kw: Any):
        return await _call(self.sync.events, *args, **kw)

    def iter_events(self, page_size: int = 100):
        return _aiter(lambda: self.sync.iter_events(page_size))

    async def snapshots(self, *args: Any, **kw: Any):
        return await _call(self.sync.snapshots, *args, **kw)

    def iter_snapshots(self, page_size: int = 100):
        return _aiter(lambda: self.sync.iter_snapshots(page_size))

    async def get_snapshot(self, snapshot_id: str):
        return await _call(self.sync.get_snapshot, snapshot_id)

    async def delete_snapshot(self, snapshot_id: str) -> None:
        await _call(self.sync.delete_snapshot, snapshot_id)

    async def create_volume(self, name: str, size_mib: int = 0, *, from_snapshot=None):
        return await _call(self.sync.create_volume, name, size_mib, from_snapshot=from_snapshot)

    async def create_volume_snapshot(self, volume: str, name=None):
        return await _call(self.sync.create_volume_snapshot, volume, name)

    async def volume_snapshots(self, volume: str):
        return await _call(self.sync.volume_snapshots, volume)

    async def delete_volume_snapshot(self, volume: str, snapshot_id: str) -> None:
        await _call(self.sync.delete_volume_snapshot, volume, snapshot_id)

    async def volumes(self):
        return await _call(self.sync.volumes)

    async def get_volume(self, name: str):
        return await _call(self.sync.get_volume, name)

    async def delete_volume(self, name: str) -> None:
        await _call(self.sync.delete_volume, name)

    async def session(self, *args: Any, **kw: Any) -> "AsyncSession":
        """Creates a session; ``async with await al.session(...) as s``
        deletes it at the end."""
        return AsyncSession(await _call(self.sync.session, *args, **kw))

    async def attach(self, session_id: str) -> "AsyncSession":
        return AsyncSession(await _call(self.sync.attach, session_id))

    async def get_session(self, session_id: str) -> SessionInfo:
        return await _call(self.sync.get_session, session_id)

    async def session_metrics(self, *args: Any, **kw: Any):
        return await _call(self.sync.session_metrics, *args, **kw)

    async def sessions(self, *args: Any, **kw: Any):
        return await _call(self.sync.sessions, *args, **kw)

    def iter_sessions(self, live: bool = True, page_size: int = 100):
        return _aiter(lambda: self.sync.iter_sessions(live, page_size))


class AsyncSession:
    """A live session with coroutines; ``sync`` is the blocking ``Session``."""

    def __init__(self, sync: Session) -> None:
        self.sync = sync
        self.id = sync.id
        self.files = AsyncFiles(sync.files)

    @property
    def info(self) -> SessionInfo:
        return self.sync.info

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r})"

    async def close(self) -> Optional[SessionInfo]:
        return await _call(self.sync.close)

    async def refresh(self) -> SessionInfo:
        return await _call(self.sync.refresh)

    async def exec(self, *args: Any, **kw: Any):
        """As ``Session.exec``; ``on_stdout``/``on_stderr`` are called from
        a worker thread."""
        return await _call(self.sync.exec, *args, **kw)

    async def signal(self, pid: int, signal: Any = 15) -> None:
        await _call(self.sync.signal, pid, signal)

    async def extend(self, timeout_s: int) -> SessionInfo:
        return await _call(self.sync.extend, timeout_s)

    async def set_network(self, *args: Any, **kw: Any) -> SessionInfo:
        return await _call(self.sync.set_network, *args, **kw)

    async def metrics(self, *args: Any, **kw: Any):
        return await _call(self.sync.metrics, *args, **kw)

    async def egress(self, *args: Any, **kw: Any):
        return await _call(self.sync.egress, *args, **kw)

    async def snapshot(self, *args: Any, **kw: Any):
        return await _call(self.sync.snapshot, *args, **kw)

    async def pause(self) -> SessionInfo:
        return await _call(self.sync.pause)

    async def resume(self) -> SessionInfo:
        return await _call(self.sync.resume)

    async def fork(self, *args: Any, **kw: Any) -> List["AsyncSession"]:
        return [AsyncSession(s) for s in await _call(self.sync.fork, *args, **kw)]

    async def to_template(self, *args: Any, **kw: Any):
        return await _call(self.sync.to_template, *args, **kw)

    async def contexts(self):
        return await _call(self.sync.contexts)

    async def context(self, language: str = "python") -> "AsyncContext":
        return AsyncContext(await _call(self.sync.context, language))


class AsyncFiles:
    """A session's files with coroutines."""

    def __init__(self, sync: Files) -> None:
        self.sync = sync

    async def write(self, path: str, data: Any) -> int:
        return await _call(self.sync.write, path, data)

    async def read(self, path: str, *args: Any, **kw: Any) -> bytes:
        return await _call(self.sync.read, path, *args, **kw)

    async def read_text(self, path: str, *args: Any, **kw: Any) -> str:
        return await _call(self.sync.read_text, path, *args, **kw)

    async def read_to(self, path: str, dest: Any) -> int:
        return await _call(self.sync.read_to, path, dest)

    async def list(self, path: str = ""):
        return await _call(self.sync.list, path)

    async def remove(self, path: str) -> None:
        await _call(self.sync.remove, path)


class AsyncContext:
    """A persistent interpreter with coroutines."""

    def __init__(self, sync: Context) -> None:
        self.sync = sync
        self.id = sync.id
        self.language = sync.language

    async def run(self, code: str, **kw: Any):
        return await _call(self.sync.run, code, **kw)

    async def restart(self) -> None:
        await _call(self.sync.restart)

    async def close(self) -> None:
        await _call(self.sync.close)
