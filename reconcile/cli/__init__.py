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

import sys

from reconcile.cli.parser import COMMAND_HELP, EPILOG, commands
from reconcile.cli.parser import parser as _parser
from reconcile.cli.steps import EXIT_FATAL, Fatal
from reconcile.cli.steps import now as _now

__all__ = ["COMMAND_HELP", "EPILOG", "Fatal", "_now", "_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from reconcile.output import logs
    # run logs what it does; the others, like kubectl diff, say only what goes wrong unless -v
    logs.setup(args.verbose + (1 if args.command == "run" else 0), args.log_format)
    try:
        return commands()[args.command].command(args, _now())
    except Fatal as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FATAL
    except BrokenPipeError:
        return EXIT_FATAL
