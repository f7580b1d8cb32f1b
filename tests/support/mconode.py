"""A test-only imitation of the MCO's node controller, of the one thing its daemon writes back, and a
counter of node updates. Beside tests/support/mcorender.py (the render controller): `settle` runs the
three in turn until nothing changes. Objects are plain dicts, in a snapshot (`sync`, `daemon`,
`settle`) or on a server like tests/support/realserver.py's `RealAPI` (`sync_api`, `daemon_api`,
`settle_api`).

Followed, in openshift/machine-config-operator (paths of that repository; the search index gave ids,
not commits, for the newest copies, which hold MachineOSConfig v1 and `getConfigAndBuild` reading the
current-machine-os-build annotation):
- `pkg/controller/node/node_controller.go` (index id 13972136414), `syncMachineConfigPool`: a pool whose
  spec.configuration.name is "" is left alone (the controller waits for the renderer); a nodeSelector
  of `{}` only records the event "SelectingAll"; a paused pool (`spec.paused`) gets `syncStatusOnly`
  and no node update; otherwise `getNodesForPool`, `maxUnavailable`, `getAllCandidateMachines`,
  `updateCandidateMachines`, then `syncStatusOnly`. The layered branch (`canLayeredContinue`, a
  MachineOSConfig for the pool) is not imitated: every pool here is non-layered.
- `getNodesForPool` (same file): the nodes `spec.nodeSelector` selects whose primary pool is this one,
  by the MCO's node-to-pool rule; reconcile/imagebuild/architecture.py `members` implements that rule
  (`pkg/helpers/helpers.go` `GetPoolsForNode`, cited and tested there) and is reused, not copied.
- `maxUnavailable` (same file): spec.maxUnavailable, default 1, through k8s.io/apimachinery
  `intstr.GetScaledValueFromIntOrPercent(..., len(nodes), false)` (rounds a percentage down), and 0
  becomes 1; an invalid value is an error and the pool gets `syncStatusOnly`. The expected values in
  tests/unit/test_mconode.py are upstream's `TestMaxUnavailable` (node_controller_test.go, index id
  33126285789). `GetScaledValueFromIntOrPercent` / `getIntOrPercentValueSafely`
  (apimachinery `pkg/util/intstr/intstr.go`, index id 413802444): an int is itself; a string must end
  in "%" ("invalid type: string is not a percentage") and parse as an int (`invalid value %q: ...`);
  percent * total / 100, `math.Ceil` when roundUp, else `math.Floor`; errors prefixed "invalid value for
  IntOrString: ". The node controller passes roundUp false; `scaled` takes both.
- `getAllCandidateMachines` (same file) with `pkg/controller/common/layered_node_state.go` (index id
  14314487802; find_files names its commit 2582fcbcc91e159e5675ed1434db11fc1dc5c503): capacity =
  maxUnavailable - the nodes `IsUnavailableForUpdate` (unready; or not `IsNodeDone` and not
  `IsNodeMCDFailing`), nothing when that is <= 0; candidates: `CheckNodeCandidacyForUpdate` (desiredConfig
  differs from spec.configuration.name, or it is equal but a desiredImage annotation is present: an
  opt-out of layering) and `IsNodeReady`; nodes already targeting the config whose daemon is failing
  (Degraded/Unreconcilable with current != desired) take capacity too.
- `updateCandidateMachines` / `sortNodeList` / `setDesiredAnnotations` / `updateCandidateNode`: when the
  candidates outnumber the capacity, sort them (topology.kubernetes.io/zone label order, nodes without
  one last, each group oldest creationTimestamp first) and take the first `capacity`;
  `SetDesiredStateFromPool` (layered_node_state.go) sets desiredConfig = spec.configuration.name and
  deletes desiredImage, sent as a strategic merge PATCH of the Node.
- `IsNodeDone` / `isNodeConfigDone` / `isNodeImageDone` / `CheckNodeReady` (layered_node_state.go):
  current == desired, both set; the image annotations both absent, or both set and equal; state Done;
  ready = no Ready!=True, DiskPressure!=False or NetworkUnavailable!=False condition and not
  spec.unschedulable (a Node with no conditions is ready).
- `pkg/controller/node/status.go` (index id 36417010171, the path with ImageModeStatusReporting off and
  no MachineConfigNodes; id 13981714062 is a later copy of `calculateStatus`): machineCount = the pool's
  nodes; updatedMachineCount = `getUpdatedMachines` (`IsDone`: done, desiredConfig = the target, no
  desiredImage); readyMachineCount = updated and ready; unavailableMachineCount = `getUnavailableMachines`;
  degradedMachineCount = `getDegradedMachines` (desiredConfig set, state Degraded or Unreconcilable);
  status.configuration = spec.configuration only when updated == ready == machineCount and none
  unavailable (mcorender.update_conditions, shared with `roll_out`); NodeDegraded ("%d nodes are
  reporting degraded status on sync", the nodes' reasons) and Degraded (NodeDegraded or RenderDegraded).
  `syncStatusOnly` writes the status only when it changed.
- The daemon's side, `pkg/daemon/writer.go` `SetDone` (index id 14157749504): currentConfig = the config
  it applied, state Done, reason ""; currentImage only when its on-disk current image is not empty, and
  currentImage / desiredImage deleted when empty. For a non-layered MachineConfig that image is empty
  (`newOnDiskConfigFromMachineConfig` in the daemon's test, index id 14352551158): a non-layered pool's
  node gets neither image annotation, so the OS image (the rendered config's spec.osImageURL) is only in
  the `Counter`.
- `first_boot`: a new node's annotations as the Machine Config Server writes them for the daemon
  (`pkg/server/server.go` `getNodeAnnotation`, index id 4589205568: currentConfig = desiredConfig = the
  config it served, state Done). A node without them is "unavailable" to the controller and holds a
  unit of the pool's capacity, as upstream's `IsUnavailableForUpdate` says.

What this imitation does NOT prove (also in docs/development.md):
- Nothing happens on a node: no drain (PodDisruptionBudgets, a drain that never ends), no cordon, no
  reboot, no rebase to the OS image, no Working state, no daemon that degrades on an unreconcilable
  change or fails to pull the image. The daemon step is instant and always succeeds, unless the desired
  MachineConfig does not exist (then Degraded, wording ours).
- Not imitated from the controller: layered (MachineOSConfig) pools and `canLayeredContinue`,
  MachineConfigNodes and the ImageModeStatusReporting path, the NodeUpdateInProgress taint, the
  controlPlaneTopology annotation and its need of a ControllerConfig, deferring the node that runs the
  machine-config-operator Pod (master), custom-pool-booted nodes, the update delay and requeues, events,
  metrics, certExpirys, pool synchronizers (PinnedImageSets), status.osImageStream (carried over
  unchanged). Ties in `sortNodeList` (Go's unstable `sort.Slice`) are broken by name here.
- Timing: a round is one pass of each controller; a real cluster interleaves them, and a daemon may
  finish one node while the controller targets another.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconcile.imagebuild.platform import architecture
from tests.support import mcorender

MCO = mcorender.MCO
#: pkg/daemon/constants: the annotations the controller and the daemon talk through
DESIRED = f"{MCO}/desiredConfig"
CURRENT = f"{MCO}/currentConfig"
STATE = f"{MCO}/state"
REASON = f"{MCO}/reason"
DESIRED_IMAGE = f"{MCO}/desiredImage"
CURRENT_IMAGE = f"{MCO}/currentImage"
DONE, WORKING, DEGRADED, UNRECONCILABLE = "Done", "Working", "Degraded", "Unreconcilable"
ZONE = "topology.kubernetes.io/zone"                                 # zoneLabel
EPOCH = mcorender.EPOCH
STRATEGIC = "application/strategic-merge-patch+json"


class Unsettled(AssertionError):
    """`settle` ran out of rounds with something still changing."""


# counting -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Update:
    """One node moved by the daemon from `from_config` to `to_config`. The images are the rendered
    configs' spec.osImageURL (None: that MachineConfig was not found)."""
    node: str
    from_config: str
    to_config: str
    from_image: str | None
    to_image: str | None
    round: int = 0

    @property
    def os_changed(self) -> bool:
        return self.from_image != self.to_image


@dataclass
class Counter:
    """Every node update, in order."""
    updates: list[Update] = field(default_factory=list)

    def __iter__(self) -> Iterator[Update]:
        return iter(self.updates)

    def __len__(self) -> int:
        return len(self.updates)

    def per_node(self) -> dict[str, int]:
        """Node name -> how many updates it took."""
        out: dict[str, int] = {}
        for u in self.updates:
            out[u.node] = out.get(u.node, 0) + 1
        return out

    def of(self, node: str) -> list[Update]:
        return [u for u in self.updates if u.node == node]

    @property
    def os_changes(self) -> int:
        """Updates that changed the OS image (a rebase and, on a real node, a reboot into it)."""
        return sum(u.os_changed for u in self.updates)

    @property
    def rounds(self) -> int:
        """How many rounds moved at least one node."""
        return len({u.round for u in self.updates})


# node state -----------------------------------------------------------------------------------
def _ann(node: Mapping[str, Any]) -> dict[str, str]:
    return (node.get("metadata") or {}).get("annotations") or {}


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _target(pool: Mapping[str, Any]) -> str:
    return str(((pool.get("spec") or {}).get("configuration") or {}).get("name") or "")


def is_ready(node: Mapping[str, Any]) -> bool:
    """`CheckNodeReady` == nil."""
    for cond in (node.get("status") or {}).get("conditions") or []:
        kind, value = cond.get("type"), cond.get("status")
        if (kind == "Ready" and value != "True") or (kind in ("DiskPressure", "NetworkUnavailable")
                                                     and value != "False"):
            return False
    return not (node.get("spec") or {}).get("unschedulable")


def is_done(node: Mapping[str, Any]) -> bool:
    """`IsNodeDone`: config done, image done, state Done."""
    ann = _ann(node)
    current, desired = ann.get(CURRENT, ""), ann.get(DESIRED, "")
    if not current or not desired or current != desired:
        return False
    if DESIRED_IMAGE in ann or CURRENT_IMAGE in ann:                     # isNodeImageDone
        d_image, c_image = ann.get(DESIRED_IMAGE, ""), ann.get(CURRENT_IMAGE, "")
        if not d_image or not c_image or d_image != c_image:
            return False
    return ann.get(STATE, "") == DONE


def is_failing(node: Mapping[str, Any]) -> bool:
    """`IsNodeMCDFailing`: current != desired and the daemon Degraded or Unreconcilable."""
    ann = _ann(node)
    return ann.get(CURRENT, "") != ann.get(DESIRED, "") and ann.get(STATE, "") in (DEGRADED, UNRECONCILABLE)


def is_unavailable(node: Mapping[str, Any]) -> bool:
    """`IsUnavailableForUpdate`: unready, or working towards a config (not done, not failing)."""
    if not is_ready(node):
        return True
    return not is_done(node) and not is_failing(node)


def is_updated(node: Mapping[str, Any], pool: Mapping[str, Any]) -> bool:
    """`IsDone` for a non-layered pool: done, on the pool's target, no desiredImage."""
    return is_done(node) and _ann(node).get(DESIRED, "") == _target(pool) and DESIRED_IMAGE not in _ann(node)


def is_degraded(node: Mapping[str, Any]) -> bool:
    """`getDegradedMachines`: desiredConfig set and the daemon Degraded or Unreconcilable."""
    ann = _ann(node)
    return bool(ann.get(DESIRED)) and ann.get(STATE, "") in (DEGRADED, UNRECONCILABLE)


# which nodes, how many ------------------------------------------------------------------------
def nodes_for_pool(pool: Mapping[str, Any], pools: Iterable[Mapping[str, Any]],
                   nodes: Iterable[Mapping[str, Any]]) -> list[Any]:
    """`getNodesForPool`: the nodes whose primary pool (architecture.members, the MCO's rule) is this
    (the same objects, not copies)."""
    pools = list(pools)
    if _name(pool) not in {_name(p) for p in pools}:
        pools.append(pool)
    return list(architecture.members(pools, nodes).get(_name(pool), []))


def scaled(value: int | str, total: int, round_up: bool) -> int:
    """`intstr.GetScaledValueFromIntOrPercent`; ValueError with upstream's wording."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    try:
        percent = int(value[:-1])
    except ValueError:
        raise ValueError(f'invalid value for IntOrString: invalid value "{value}": strconv.Atoi: '
                         f'parsing "{value[:-1]}": invalid syntax') from None
    scaled_ = percent * total / 100
    return int(math.ceil(scaled_) if round_up else math.floor(scaled_))


def max_unavailable(pool: Mapping[str, Any], nodes: int) -> int:
    """`maxUnavailable`: spec.maxUnavailable (default 1) scaled to the pool's nodes rounding down; 0 -> 1.
    ValueError (prefixed `"maxUnavailable" `) when invalid."""
    value = (pool.get("spec") or {}).get("maxUnavailable")
    try:
        out = scaled(1 if value is None else value, nodes, False)
    except ValueError as err:
        raise ValueError(f'"maxUnavailable" {err}') from None
    return out or 1


def sort_nodes(nodes: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """`sortNodeList`: by zone label, nodes without one last; oldest first within; ties by name (ours)."""
    def key(n: Mapping[str, Any]) -> tuple[int, str, str, str]:
        md = n.get("metadata") or {}
        zone = (md.get("labels") or {}).get(ZONE)
        return (zone is None, zone or "", str(md.get("creationTimestamp") or ""), _name(n))
    return sorted(nodes, key=key)


def candidates(pool: Mapping[str, Any], nodes: list[Mapping[str, Any]],
               maxunavail: int) -> tuple[list[Mapping[str, Any]], int]:
    """`getAllCandidateMachines` for a non-layered pool: (candidates, capacity)."""
    capacity = maxunavail - sum(is_unavailable(n) for n in nodes)
    if capacity <= 0:
        return [], 0
    target, failing, out = _target(pool), 0, []
    for node in nodes:
        ann = _ann(node)
        if ann.get(DESIRED, "") == target and DESIRED_IMAGE not in ann:       # CheckNodeCandidacyForUpdate
            failing += is_failing(node)
            continue
        if is_ready(node):
            out.append(node)
    if failing >= capacity:
        return [], 0
    return out, capacity - failing


def choose(pool: Mapping[str, Any], nodes: list[Mapping[str, Any]]) -> list[str]:
    """The nodes one `syncMachineConfigPool` targets at the pool's config (none when paused, when the
    pool has no config or selects every node, or when maxUnavailable is invalid)."""
    spec = pool.get("spec") or {}
    if not _target(pool) or spec.get("nodeSelector") == {} or spec.get("paused"):
        return []
    try:
        maxunavail = max_unavailable(pool, len(nodes))
    except ValueError:
        return []
    chosen, capacity = candidates(pool, nodes, maxunavail)
    if capacity < len(chosen):
        chosen = sort_nodes(chosen)[:capacity]
    return sorted(_name(n) for n in chosen)


def target_node(node: dict[str, Any], pool: Mapping[str, Any]) -> None:
    """`SetDesiredStateFromPool`, in place."""
    ann = node.setdefault("metadata", {}).setdefault("annotations", {})
    ann[DESIRED] = _target(pool)
    ann.pop(DESIRED_IMAGE, None)


# pool status ----------------------------------------------------------------------------------
def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)                      # close to Go's %q for plain text


def calculate_status(pool: Mapping[str, Any], nodes: list[Mapping[str, Any]],
                     now: str = EPOCH) -> dict[str, Any]:
    """`calculateStatus` for a non-layered pool without MachineConfigNodes: the new status (fields it
    does not compute are carried over from the old one)."""
    old = copy.deepcopy(pool.get("status") or {})
    updated = [n for n in nodes if is_updated(n, pool)]
    ready = [n for n in updated if is_ready(n)]
    unavailable = [n for n in nodes if is_unavailable(n)]
    degraded = [n for n in nodes if is_degraded(n)]
    status = {k: v for k, v in old.items() if k not in ("conditions", "configuration")}
    generation = (pool.get("metadata") or {}).get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    status.update(machineCount=len(nodes), updatedMachineCount=len(updated), readyMachineCount=len(ready),
                  unavailableMachineCount=len(unavailable), degradedMachineCount=len(degraded))
    if "configuration" in old:
        status["configuration"] = old["configuration"]
    status["conditions"] = old.get("conditions") or []
    all_updated = len(updated) == len(nodes) == len(ready) and not unavailable
    mcorender.update_conditions(dict(pool), status, all_updated, now)
    message = ", ".join(f"Node {_name(n)} is reporting: {_quote(_ann(n)[REASON])}" for n in degraded
                        if _ann(n).get(REASON))
    if degraded:
        mcorender.set_condition(status, "NodeDegraded", "True",
                                reason=f"{len(degraded)} nodes are reporting degraded status on sync",
                                message=message, now=now)
    else:
        mcorender.set_condition(status, "NodeDegraded", "False", now=now)
    render_degraded = any(c.get("type") == "RenderDegraded" and c.get("status") == "True"
                          for c in old.get("conditions") or [])
    mcorender.set_condition(status, "Degraded", "True" if degraded or render_degraded else "False",
                            message=message, now=now)
    return status


def _pools(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in items if o.get("kind") == "MachineConfigPool"]


def _nodes(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in items if o.get("kind") == "Node"]


def _syncs(pool: Mapping[str, Any]) -> bool:
    """Whether `syncMachineConfigPool` gets as far as the pool's status."""
    return bool(_target(pool)) and (pool.get("spec") or {}).get("nodeSelector") != {}


# a snapshot -----------------------------------------------------------------------------------
def sync(items: list[dict[str, Any]], now: str = EPOCH) -> list[dict[str, Any]]:
    """One pass of the node controller over every pool of a snapshot; returns new items: chosen nodes
    get desiredConfig, every pool it syncs its status."""
    out = copy.deepcopy(items)
    pools, nodes = _pools(out), _nodes(out)
    for pool in pools:
        if not _syncs(pool):
            continue
        mine = nodes_for_pool(pool, pools, nodes)
        by_name = {_name(n): n for n in mine}
        for name in choose(pool, mine):
            target_node(by_name[name], pool)
        pool["status"] = calculate_status(pool, mine, now)
    return out


def _image(mcs: Mapping[str, Mapping[str, Any]], name: str) -> str | None:
    mc = mcs.get(name)
    return None if mc is None else str((mc.get("spec") or {}).get("osImageURL") or "")


def _apply(node: dict[str, Any], mcs: Mapping[str, Mapping[str, Any]], round: int) -> Update | None:
    """The daemon on one node: nothing to do, or the annotations `SetDone` writes and the update."""
    ann = node.setdefault("metadata", {}).setdefault("annotations", {})
    desired, current = ann.get(DESIRED, ""), ann.get(CURRENT, "")
    if not desired or desired == current:
        return None
    if desired not in mcs:
        ann.update({STATE: DEGRADED, REASON: f'machineconfig "{desired}" not found'})      # wording ours
        return None
    ann.update({CURRENT: desired, STATE: DONE, REASON: ""})
    ann.pop(CURRENT_IMAGE, None)
    ann.pop(DESIRED_IMAGE, None)
    return Update(_name(node), current, desired, _image(mcs, current), _image(mcs, desired), round)


def daemon(items: list[dict[str, Any]], counter: Counter | None = None,
           round: int = 0) -> list[dict[str, Any]]:
    """Every node's daemon: a node whose desiredConfig differs from currentConfig is updated to it at
    once; each update goes to `counter`. Returns new items."""
    out = copy.deepcopy(items)
    mcs = {_name(o): o for o in out if o.get("kind") == "MachineConfig"}
    for node in _nodes(out):
        update = _apply(node, mcs, round)
        if update and counter is not None:
            counter.updates.append(update)
    return out


def first_boot(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nodes the daemon has never run on get the annotations the Machine Config Server serves them:
    currentConfig = desiredConfig = their pool's spec.configuration.name, state Done."""
    out = copy.deepcopy(items)
    pools = _pools(out)
    for node in _nodes(out):
        _boot(node, pools)
    return out


def _boot(node: dict[str, Any], pools: list[dict[str, Any]]) -> bool:
    owner = architecture.primary_pool(node, pools)
    pool = next((p for p in pools if _name(p) == owner), None)
    ann = node.setdefault("metadata", {}).setdefault("annotations", {})
    if pool is None or not _target(pool) or ann.get(CURRENT):
        return False
    ann.update({CURRENT: _target(pool), DESIRED: _target(pool), STATE: DONE})
    return True


def _fingerprint(objs: Iterable[Mapping[str, Any]]) -> str:
    """What a round can change, conditions compared as a set (their order is not state)."""
    def strip(o: Mapping[str, Any]) -> Any:
        o = copy.deepcopy(dict(o))
        (o.get("metadata") or {}).pop("resourceVersion", None)
        (o.get("metadata") or {}).pop("managedFields", None)
        status = o.get("status") or {}
        if "conditions" in status:
            status["conditions"] = sorted(status["conditions"], key=lambda c: c.get("type", ""))
        return o
    return json.dumps(sorted((strip(o) for o in objs), key=lambda o: (o.get("kind", ""), _name(o))),
                      sort_keys=True)


def _watched(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in items if o.get("kind") in ("MachineConfigPool", "Node", "MachineConfig")]


def settle(items: list[dict[str, Any]], base_image: str | None = None, counter: Counter | None = None,
           rounds: int = 30, now: str = EPOCH) -> tuple[list[dict[str, Any]], Counter]:
    """Rounds of render (mcorender.sync), node controller (`sync`) and daemon (`daemon`) until a round
    changes no pool, node or MachineConfig; (the settled items, the counter). Raises `Unsettled` after
    `rounds`. Nodes without currentConfig stay as they are (see `first_boot`)."""
    counter = counter if counter is not None else Counter()
    for n in range(1, rounds + 1):
        before = _fingerprint(_watched(items))
        items = mcorender.sync(items, base_image=base_image, now=now)
        items = daemon(sync(items, now), counter, n)
        if _fingerprint(_watched(items)) == before:
            return items, counter
    raise Unsettled(f"still changing after {rounds} rounds; {len(counter)} node updates so far")


# a live API -----------------------------------------------------------------------------------
def _patch_node(api: Any, name: str, annotations: dict[str, str | None]) -> None:
    api.request("PATCH", api.path("Node", "", name), {"metadata": {"annotations": annotations}},
                content_type=STRATEGIC)


def sync_api(api: Any, pool_name: str, now: str = EPOCH) -> list[str]:
    """One `syncMachineConfigPool` on a live server: PATCH desiredConfig onto the chosen nodes, then
    PUT the pool's status (through the status subresource) when it changed. Returns the nodes targeted."""
    pools = api.list("MachineConfigPool")
    pool = next((p for p in pools if _name(p) == pool_name), None)
    if pool is None or not _syncs(pool):
        return []
    chosen = choose(pool, nodes_for_pool(pool, pools, api.list("Node")))
    for name in chosen:
        _patch_node(api, name, {DESIRED: _target(pool), DESIRED_IMAGE: None})
    mine = nodes_for_pool(pool, pools, api.list("Node"))                  # syncStatusOnly lists again
    status = calculate_status(pool, mine, now)
    if _fingerprint([{"status": status}]) != _fingerprint([{"status": pool.get("status") or {}}]):
        api.request("PUT", api.path("MachineConfigPool", "", pool_name) + "/status", dict(pool, status=status))
    return chosen


def daemon_api(api: Any, counter: Counter | None = None, round: int = 0) -> list[Update]:
    """Every node's daemon on a live server, each write a PATCH of the Node's annotations (deleting
    the image annotations with null). Returns (and counts) the updates."""
    mcs = {_name(mc): mc for mc in api.list("MachineConfig")}
    done = []
    for node in api.list("Node"):
        before = dict(_ann(node))
        update = _apply(node, mcs, round)
        after = _ann(node)
        if after != before:
            patch: dict[str, str | None] = {k: v for k, v in after.items() if before.get(k) != v}
            patch.update({k: None for k in before if k not in after})
            _patch_node(api, _name(node), patch)
        if update:
            done.append(update)
    if counter is not None:
        counter.updates.extend(done)
    return done


def first_boot_api(api: Any) -> list[str]:
    """`first_boot` on a live server; returns the nodes annotated."""
    pools, booted = api.list("MachineConfigPool"), []
    for node in api.list("Node"):
        if _boot(node, pools):
            _patch_node(api, _name(node), {k: _ann(node)[k] for k in (CURRENT, DESIRED, STATE)})
            booted.append(_name(node))
    return booted


def settle_api(api: Any, base_image: str, counter: Counter | None = None, rounds: int = 30,
               now: str = EPOCH) -> Counter:
    """`settle` on a live server: each round renders every pool (mcorender.sync_api; a refusal is
    recorded on the pool and the round goes on), syncs every pool, runs the daemons. Returns the counter;
    raises `Unsettled`."""
    counter = counter if counter is not None else Counter()
    for n in range(1, rounds + 1):
        before = _fingerprint(_watched(_live(api)))
        for pool in api.list("MachineConfigPool"):
            try:
                mcorender.sync_api(api, _name(pool), base_image, now=now)
            except mcorender.RenderError:
                pass
        for pool in api.list("MachineConfigPool"):
            sync_api(api, _name(pool), now)
        daemon_api(api, counter, n)
        if _fingerprint(_watched(_live(api))) == before:
            return counter
    raise Unsettled(f"still changing after {rounds} rounds; {len(counter)} node updates so far")


def _live(api: Any) -> list[dict[str, Any]]:
    return [*api.list("MachineConfigPool"), *api.list("Node"), *api.list("MachineConfig")]
