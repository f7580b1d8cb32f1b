"""The command line, `ocl-reconcile run|diff|render|status|explain|preflight`, one module a verb
(as kubectl's `pkg/cmd/<verb>/` and argocd's `cmd/argocd/commands/<noun>.go`):

- `commands/<verb>.py`: one command each: its name, help and exit codes, its flags (`arguments`)
  and what it does (`command(args, now)`), a short pipeline of steps named for the modules that
  own them;
- `parser`: the small shared core: the program's description and epilog, the flags several
  commands share (`--snapshot`, `--pool`, `-n`), and every module of `commands/` registered as a
  subcommand, in the order of its `ORDER`;
- `steps`: what commands share: the clock, the cluster, the one read and its planner, the exit
  codes and `Fatal`.

A new verb is a new module of `commands/`; no other file grows. Imports are lazy, so `--help` is
fast."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

from reconcile.cli.parser import COMMAND_HELP, EPILOG, commands
from reconcile.cli.parser import parser as _parser
from reconcile.cli.steps import EXIT_FATAL, EXIT_INTERRUPTED, Fatal
from reconcile.cli.steps import now as _now

__all__ = ["COMMAND_HELP", "EPILOG", "Fatal", "_now", "_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from reconcile.output import logs
    # run logs what it does; the others, like kubectl diff, say only what goes wrong unless -v
    logs.setup(args.verbose + (1 if args.command == "run" else 0), args.log_format)
    with _terminated_as_interrupted():
        try:
            return commands()[args.command].command(args, _now())
        except Fatal as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_FATAL
        except BrokenPipeError:
            return EXIT_FATAL
        except KeyboardInterrupt:           # before run --wait's waiting, which ends on it by itself
            print("error: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


@contextlib.contextmanager
def _terminated_as_interrupted() -> Iterator[None]:
    """SIGTERM (the kubelet's, at a Job's activeDeadlineSeconds or a Pod's deletion) handled as
    Ctrl-C: run --wait ends its wait with its summary and metrics, and the Lease is released, so
    the next run need not wait for it to expire. Only in the main thread, and the handler before
    restored after (the tests call main in-process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
