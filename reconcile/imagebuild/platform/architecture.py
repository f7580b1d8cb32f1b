"""The CPU architecture a pool's image must be built for: that of the pool's nodes.

The MCO builds only `NoArch` Containerfiles and sets no node selector on its build Pod
(openshift/machine-config-operator `pkg/controller/build/buildrequest/buildrequest.go`), so in a
multi-architecture cluster its build may run on a node of another architecture than the pool's
and push an image the pool cannot boot. Ours runs on a node of the pool's architecture: the
architecture goes into the build object's `nodeSelector` and into the build id.

Which pool a node belongs to follows the MCO (`pkg/helpers/helpers.go`, `ListPools` and
`GetPoolsForNode`): Windows nodes belong to none; a pool whose `nodeSelector` is null or empty
selects nothing; a node selected by one custom pool belongs to it (to `master` if master selects
it too); by more than one custom pool, to none; else to `master`, else to `worker`.

A pool whose nodes are of several architectures (amd64 and arm64, say) gets one build per
architecture and one image index over them (core/multiarch.py): its architecture is written as
the sorted names joined by commas (`amd64,arm64`), which no GOARCH value contains.

Pure: (the pool, every pool, the nodes' labels) -> the architecture(s), or why there is none."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile.contract import objects, selector
from reconcile.contract.naming import MASTER, WORKER

#: The label the kubelet sets on every node (kubernetes.io/arch, a GOARCH value).
ARCH_LABEL = "kubernetes.io/arch"
OS_LABEL = "kubernetes.io/os"


#: Between the architectures of a mixed pool, sorted: `amd64,arm64`.
SEPARATOR = ","


class Mixed(ValueError):
    """Some or all of the pool's nodes say no architecture: no image is known to boot them all."""


@dataclass(frozen=True)
class Arch:
    """`name`: the architecture of every node of the pool, or those of a mixed pool joined by
    SEPARATOR; "" when the pool has no nodes yet (the build then runs anywhere, and the pool's first
    nodes change the build id)."""
    name: str
    nodes: int


def split(arch: str) -> tuple[str, ...]:
    """The architectures a recorded or decided `arch` names: one, several (a mixed pool), or none."""
    return tuple(a for a in arch.split(SEPARATOR) if a)


def mixed(arch: str) -> bool:
    return len(split(arch)) > 1


def node_selector(arch: str) -> dict[str, str]:
    """Where a build for `arch` runs: a node of it ("" : anywhere)."""
    return {ARCH_LABEL: arch} if arch else {}


def note(arch: str) -> str:
    """What the pool's message says of a build for `arch`."""
    return "" if arch else ("the pool has no nodes yet: built without an architecture node selector; "
                            "its first nodes start a build for their architecture")


def _selects(pool: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    chosen = (pool.get("spec") or {}).get("nodeSelector")
    if not isinstance(chosen, Mapping) or not (chosen.get("matchLabels") or chosen.get("matchExpressions")):
        return False                # "a nil or empty selector ... should match nothing, not everything"
    try:
        return selector.selects(chosen, labels)
    except selector.InvalidSelector:
        return False                # the MCO errors on it: the node belongs to no pool we can name


def primary_pool(node: Mapping[str, Any], pools: Iterable[Mapping[str, Any]]) -> str | None:
    """The name of the pool the node belongs to, or None."""
    labels = objects.labels(node)
    if labels.get(OS_LABEL) == "windows":
        return None
    names = [objects.name(p) for p in pools if _selects(p, labels)]
    custom = [n for n in names if n not in (MASTER, WORKER)]
    if len(custom) > 1:
        return None
    if MASTER in names:
        return MASTER
    if custom:
        return custom[0]
    return WORKER if WORKER in names else None


def members(pools: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]]
            ) -> dict[str, list[Mapping[str, Any]]]:
    """Each pool's nodes, by pool name: every node looked at once."""
    pools = list(pools)
    out: dict[str, list[Mapping[str, Any]]] = {}
    for node in nodes:
        owner = primary_pool(node, pools)
        if owner is not None:
            out.setdefault(owner, []).append(node)
    return out


def of_pool(pool: Mapping[str, Any], pools: Iterable[Mapping[str, Any]],
            nodes: Iterable[Mapping[str, Any]],
            assigned: Mapping[str, list[Mapping[str, Any]]] | None = None) -> Arch:
    """The architecture of the pool's nodes. `assigned`: `members(pools, nodes)`, when already
    computed (it is worked out here when not, or when `pools` lacks this pool). Raises Mixed."""
    name, pools = objects.name(pool), list(pools)
    if name not in {objects.name(p) for p in pools}:
        pools, assigned = pools + [pool], None
    mine = (assigned if assigned is not None else members(pools, nodes)).get(name, [])
    by_arch: dict[str, list[str]] = {}
    for node in sorted(mine, key=objects.name):
        by_arch.setdefault(objects.labels(node).get(ARCH_LABEL, ""), []).append(objects.name(node))
    if list(by_arch) == [""]:           # not a pool without nodes: nodes of an unknown architecture
        raise Mixed(f"MachineConfigPool {name}: none of its nodes has the label {ARCH_LABEL} "
                    f"({_some(by_arch[''])}), which the kubelet sets: the architecture to build for is "
                    "not known; label them, or check their kubelet")
    if "" in by_arch:
        found = "; ".join(f"{arch or f'no {ARCH_LABEL} label'}: {_some(names)}"
                          for arch, names in sorted(by_arch.items()))
        raise Mixed(f"MachineConfigPool {name}: some of its nodes have no {ARCH_LABEL} label ({found}), "
                    "which the kubelet sets: the architectures to build for are not known; label them, "
                    "or check their kubelet")
    return Arch(SEPARATOR.join(sorted(by_arch)), len(mine))


def _some(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
