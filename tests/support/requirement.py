"""A real part a suite needs and cannot find: skipped, saying why, or failed where CI requires it
(`.ci/run` sets `OCL_<SUITE>=require`)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(env: str, problem: str) -> NoReturn:
    if os.environ.get(env) == "require":
        pytest.fail(f"{problem}; {env}=require makes this a failure")
    pytest.skip(f"{problem}; set {env}=require to make this a failure")
