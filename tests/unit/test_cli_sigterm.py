"""SIGTERM, the kubelet's at a Job's activeDeadlineSeconds or a Pod's deletion, is handled as Ctrl-C
(issue 52: the real node's deadline test found a run killed with its Lease held). The wait's own
end on it is tested on the real node (tests/realnode/test_cronjob.py); here the command line's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from reconcile import cli
from reconcile.cli import parser
from tests.support import factory as F

#: a command that gets SIGTERM while it works, in a process of its own (unhandled, the signal would
#: end the test's process)
TERMINATED = """
import os, signal, sys, threading
from reconcile import cli
from reconcile.cli import parser
def terminated(args, now):
    os.kill(os.getpid(), signal.SIGTERM)
    threading.Event().wait(5)
    sys.exit("SIGTERM did not interrupt the command")
parser.commands()["status"].command = terminated
sys.exit(cli.main(["status", "--snapshot", "examples/cluster.yaml"]))
"""


def test_sigterm_during_a_command_ends_it_as_interrupted_with_130():
    done = subprocess.run([sys.executable, "-c", TERMINATED], capture_output=True, text=True, timeout=60,
                          cwd=F.ROOT)
    assert (done.returncode, done.stderr) == (130, "error: interrupted\n")    # 128 + SIGINT, as a shell says


def test_the_handler_before_is_restored_after_a_command(monkeypatch, capsys):
    seen = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        monkeypatch.setattr(parser.commands()["status"], "command",
                            lambda args, now: signal.getsignal(signal.SIGTERM) is signal.default_int_handler)
        assert cli.main(["status", "--snapshot", "examples/cluster.yaml"]) is True     # handled within
        os.kill(os.getpid(), signal.SIGTERM)                                        # ...and ours after
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)
