"""The parser core: the program's description and epilog, the flags several commands share, and
each module of `reconcile/cli/commands/` registered as a subcommand (in the order of its `ORDER`).

A command module says `NAME`, `ORDER`, `SUMMARY` (its line in `--help`'s list), `LINE` (its line
in the epilog), `DESCRIPTION` and `CODES` (`COMMAND --help`), `PARENTS` (which shared flags it
takes, below), and defines `arguments(parser)` (its own flags) and `command(args, now)` (exit code)."""

from __future__ import annotations

import argparse
import functools
import importlib
import pkgutil
from types import ModuleType

from reconcile.cli import commands as _commands
from reconcile.cli.steps import REGISTRY_CA

DESCRIPTION = """\
One-shot reconciler for OpenShift on-cluster layering. Finds every MachineConfigPool labelled
ocl-reconciler.io/layering-enabled, builds a layered OS image of its rendered MachineConfig, and
records the outcome on the pool as annotations. A pool labelled with the MCO's own
machineconfiguration.openshift.io/layering-enabled is reported, not built (docs/rollout.md).
"""

EXAMPLES = """\
examples:
  ocl-reconcile diff --snapshot cluster.yaml
  ocl-reconcile run --snapshot cluster.yaml --write-snapshot after.yaml
  oc get mcp -o yaml | ocl-reconcile status --snapshot -
  ocl-reconcile explain worker
  ocl-reconcile preflight
"""


def commands() -> dict[str, ModuleType]:
    """Every command module, by name, in the order of its `ORDER`."""
    return dict(_found())


@functools.cache
def _found() -> tuple[tuple[str, ModuleType], ...]:
    found = [importlib.import_module(f"{_commands.__name__}.{m.name}")
             for m in pkgutil.iter_modules(_commands.__path__) if not m.ispkg]
    return tuple((m.NAME, m) for m in sorted(found, key=lambda m: m.ORDER))


def _epilog() -> str:
    lines = "".join(f"  {name:<9} {m.LINE}\n" for name, m in _found())
    return (f"commands:\n{lines}`ocl-reconcile COMMAND --help` says each one's flags and exit codes; "
            f"Ctrl-C or\nSIGTERM ends any command with 130, but run --wait's wait: that ends with the code "
            f"of what\nwas done, its Lease released.\n\n{EXAMPLES}")


EPILOG = _epilog()
#: per command: (description, exit codes) shown by `COMMAND --help`
COMMAND_HELP = {name: (m.DESCRIPTION, m.CODES) for name, m in _found()}


def _connection(snapshot_help: str) -> argparse.ArgumentParser:
    """How a command reaches the cluster, and how it logs."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--snapshot", metavar="FILE", help=snapshot_help)
    parent.add_argument("--kubeconfig", metavar="FILE",
                        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
    parent.add_argument("--context", help="kubeconfig context to use (default: the current one)")
    parent.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                        help="deadline for the whole run, retries included (default: %(default)s)")
    parent.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging (run logs what it does; -v: the others too; -vv: debug)")
    parent.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="log lines on stderr as text or JSON (default: %(default)s)")
    return parent


def _shared() -> dict[str, argparse.ArgumentParser]:
    """The flags several commands share, by the name a command's `PARENTS` gives them."""
    source = _connection("read the cluster from FILE ('-' for stdin) as `oc get ... -o yaml` prints it, "
                         "instead of a live cluster")
    live = _connection(argparse.SUPPRESS)      # preflight: live only (--snapshot refused, saying why)
    select = argparse.ArgumentParser(add_help=False)
    select.add_argument("--pool", action="append", default=[], metavar="NAME",
                        help="only this MachineConfigPool (repeatable)")
    namespaced = argparse.ArgumentParser(add_help=False)
    from reconcile.contract.naming import DEFAULT_NAMESPACE
    namespaced.add_argument("-n", "--namespace", default=DEFAULT_NAMESPACE,
                            help="namespace of the settings and build objects (default: %(default)s)")
    namespaced.add_argument("--registry-ca", metavar="FILE", default=None,
                            help="PEM CA certificates trusted for the image registry besides the system's "
                                 f"(default: {REGISTRY_CA} when it exists: the CronJob mounts the "
                                 "namespace's openshift-service-ca.crt ConfigMap there)")
    return {"source": source, "live": live, "select": select, "namespaced": namespaced}


@functools.cache
def parser() -> argparse.ArgumentParser:
    """Built once a process (parsing leaves it as it was): a process that runs `main` many times,
    as the tests do, builds it once (11 ms each time)."""
    top = argparse.ArgumentParser(
        prog="ocl-reconcile", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    from reconcile import __version__
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    shared = _shared()
    for name, m in _found():
        m.arguments(sub.add_parser(name, parents=[shared[p] for p in m.PARENTS], help=m.SUMMARY,
                                   description=m.DESCRIPTION, epilog=m.CODES))
    return top
