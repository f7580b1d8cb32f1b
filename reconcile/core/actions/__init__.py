"""The plan: an ordered list of writes per pool, plus the state change it records. Pure data.
Beside it: `table` (a transition -> its actions, one function a row in `buildrows` and
`poolrows`, on the `Step` of `step`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from reconcile.contract import objects


@dataclass(frozen=True)
class Write:
    """One effect of a run. `obj` is the body to create, or the live object to patch or delete;
    `after` is the object as the patch leaves it (what a diff shows). A "prune" deletes `images`
    from the registry, then patches the pool's image history (`obj`) as `after` shows. A "push" puts
    a mixed pool's image index (`body`) into the registry as `obj` describes it (core/multiarch.py)."""
    verb: str                      # "create" | "patch" | "delete" | "prune" | "push"
    obj: dict[str, Any]
    patch: tuple[dict[str, Any], ...] = ()
    after: dict[str, Any] | None = None
    images: tuple[str, ...] = ()
    #: a "prune": images dropped from the history without a delete (not in our repository)
    forget: tuple[str, ...] = ()
    #: a "prune" with signing on: each deleted image's cosign signature tag goes too
    signatures: bool = False
    #: a "push": the bytes of the image index
    body: bytes = b""

    @property
    def ref(self) -> str:
        return objects.ref(self.obj)


class WarningNote(str):
    """A note logged as a warning, not as information: what a pool annotation that someone else may
    have written asked for, and the run refused (an image of another repository in the history).
    `diff` and `explain` show it as any note."""


@dataclass
class PoolPlan:
    pool: str
    state_before: str | None = None
    state_after: str | None = None
    message: str = ""
    actions: list[Write] = field(default_factory=list)
    #: What the plan decided not to do, for people (images kept because something uses them); a
    #: WarningNote is logged as a warning.
    notes: list[str] = field(default_factory=list)
    #: The lifecycle transition (docs/contract.md, "Lifecycle"), e.g. "START", "REUSE".
    transition: str = ""
    #: Pools that will roll out the image this plan writes into a MachineConfig (rollout: machineconfig).
    rollout: tuple[str, ...] = ()
    #: The rollout gate's move for the pool (core/rollout/hold.py `Move` name; "" when there is none), and
    #: its record once the plan is carried out (`held`, ...; "") with its time (metrics).
    hold: str = ""
    gate: str = ""
    #: a mixed pool (core/multiarch.py): each architecture's build state after this run
    architectures: dict[str, str] = field(default_factory=dict)
    gate_since: str = ""

    @property
    def blocked(self) -> bool:
        return self.state_after == "Blocked"

    def count(self, verb: str) -> int:
        """Writes of a verb, Events (records of transitions) not counted; for "prune", images."""
        if verb == "prune":
            return sum(len(a.images) for a in self.actions if a.verb == "prune")
        return sum(1 for a in self.actions if a.verb == verb and a.obj.get("kind") != "Event")


def carried_out(plan: PoolPlan) -> PoolPlan:
    """The plan as a run keeps it once carried out: each created object reduced to its kind and
    metadata (the body went to the server; an encoded MachineConfig is a MiB), all that the
    summary, metrics and image pruning read of it."""
    return replace(plan, actions=[replace(a, obj={k: a.obj[k] for k in ("apiVersion", "kind", "metadata")
                                                  if k in a.obj}) if a.verb == "create" else a
                                  for a in plan.actions])
