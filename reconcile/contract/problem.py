"""An error as a value: why settings or inputs cannot be used, in one line for the pool's message."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    message: str

    def __str__(self) -> str:
        return self.message
