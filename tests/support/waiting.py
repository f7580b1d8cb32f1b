"""Polling for what a real component does in its own time (a controller, the kubelet, Argo CD)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def until(what: str, done: Callable[[], Any], seconds: float = 90, every: float = 0.3,
          why: Callable[[], str] = lambda: "") -> Any:
    """`done()`'s first true value, polled every `every` s; after `seconds`, an AssertionError naming
    `what` and `why()` (a log's tail, say). `done` may raise to end the wait sooner."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = done()
        if value:
            return value
        time.sleep(every)
    reason = why()
    raise AssertionError(f"{what} not within {seconds} s" + (f": {reason}" if reason else ""))
