"""Queue mode: batches go through Redis, on RQ queues, to `proctor worker`s on any machine.

`api` is the API side (the `Dispatcher`), `batch` one batch's life on it, `host` the worker
command, `wire` what both sides share (keys, timings, connecting).
"""

from __future__ import annotations

from service.dispatch.queue.api import QueueDispatcher

__all__ = ["QueueDispatcher"]
