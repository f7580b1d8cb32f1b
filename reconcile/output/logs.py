"""Logging to stderr as text or JSON lines (`--log-format`); stdout is kept for results."""

from __future__ import annotations

import json
import logging
import sys


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname.lower(),
                 "msg": record.getMessage()}
        if getattr(record, "pool", None):
            entry["pool"] = record.pool
        return json.dumps(entry, ensure_ascii=False)


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (it may be replaced after setup)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def setup(verbosity: int, fmt: str) -> None:
    handler = _Stderr(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json"
                         else logging.Formatter("%(levelname)s %(message)s"))
    root = logging.getLogger("reconcile")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO if verbosity == 1 else logging.WARNING)
    root.propagate = False
