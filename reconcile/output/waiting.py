"""What a waiting run (`run --wait`) shows while it waits (core/waits.py says what for). In the
log, one line per change of state: a wait that starts or changes phase (`waiting: worker: build
Pod/ocl-reconciler/... Running`), one that ends (`done: ...`). On a terminal (text logs on a tty),
also one status line, redrawn in place each second: every wait with its elapsed time."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from datetime import datetime
from typing import TextIO

from reconcile.core.waits import Wait

log = logging.getLogger("reconcile")
CLEAR = "\r\x1b[K"


def changes(before: Sequence[Wait], after: Sequence[Wait]) -> list[str]:
    """The log lines for a change of what is waited for: ended waits first, then new ones (a new
    phase of the same step is a new line); none when nothing changed."""
    was = {w.key: w for w in before}
    now = {w.key: w for w in after}
    steps = {w.key[:3] for w in after}
    ended = [f"done: {w.line()}" for k, w in was.items() if k not in now and k[:3] not in steps]
    return ended + [f"waiting: {w.line()}" for k, w in now.items() if k not in was]


def status_line(waits: Sequence[Wait], now: datetime, left: float, width: int) -> str:
    """The terminal's line: `waiting 4m10s more: worker: build ... Running, 2m05s | infra: ...`,
    cut to the terminal's width."""
    text = f"waiting {int(left) // 60}m{int(left) % 60:02d}s more: " + " | ".join(w.line(now) for w in waits)
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


class Shower:
    """Says what the run waits for: `update` logs the changes; `tick` redraws the terminal line."""

    def __init__(self, stream: TextIO | None):
        self.stream = stream            # a terminal, or None (logs only)
        self.waits: list[Wait] = []
        self.drawn = False

    def clear(self) -> None:
        if self.stream is not None and self.drawn:
            self.stream.write(CLEAR)
            self.stream.flush()
            self.drawn = False

    def update(self, waits: Sequence[Wait]) -> None:
        lines = changes(self.waits, waits)
        if lines:
            self.clear()
        for line in lines:
            log.info("%s", line)
        self.waits = list(waits)

    def tick(self, now: datetime, left: float) -> None:
        if self.stream is None or not self.waits:
            return
        width = shutil.get_terminal_size((100, 20)).columns
        self.stream.write(CLEAR + status_line(self.waits, now, left, width))
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        self.clear()
