"""bench/suite_time.py's pytest plugin: each test's worker, wall time and the worker's own CPU
seconds, one JSON line a test, in $SUITE_TIME_DIR/<worker>.jsonl."""

import json
import os
import time

import pytest

_out = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _out
    t0, c0 = time.time(), time.process_time()
    yield
    if _out is None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _out = open(os.path.join(os.environ["SUITE_TIME_DIR"], worker + ".jsonl"), "a")
    _out.write(json.dumps({"id": item.nodeid, "w": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                           "start": t0, "end": time.time(), "cpu": time.process_time() - c0}) + "\n")
    _out.flush()
