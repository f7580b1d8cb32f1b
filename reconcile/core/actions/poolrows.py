"""The actions of the rows about a pool rather than a build (docs/contract.md's lifecycle table):
OPT_OUT and POOL_GONE remove what is ours, MCO_LABEL reports the MCO's label (core/mcolabel.py);
BLOCKED is `record_blocked` (core/actions/step.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconcile.contract import annotations as A
from reconcile.core import desired, events, mcolabel, rollout, storage
from reconcile.core.actions import Write
from reconcile.core.actions.step import Step, apply_rollout, patch_annotations, rfc3339


def opt_out(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """Our objects go (a labelled volume that is not ours stays: core/storage/), and so does
    every key of ours on the pool."""
    s.delete(o for o in s.d.owned
             if o.get("kind") != rollout.KIND and storage.deletable(o, s.d.pool, s.d.pool_name))
    # before the annotations go: the Event is named with the pool's transition time, so a rerun
    # after a kill finds it instead of telling it twice
    apply_rollout(s, rollout.remove(s.d.rollout or rollout.View(), s.d.pool, s.d.pool_name, rfc3339(s.now)))
    patch_annotations(s.plan, s.d.pool, {k: None for k in s.ann if A.owned(k)})


def pool_gone(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    s.delete(o for o in s.d.owned
             if o.get("kind") != rollout.KIND and storage.deletable(o, None, s.d.pool_name))
    apply_rollout(s, rollout.remove(s.d.rollout or rollout.View(), None, s.d.pool_name, rfc3339(s.now)))


def mco_label(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """Reported, and nothing else: no state written, nothing deleted (core/mcolabel.py)."""
    told = A.one_line(s.d.problem, 1024)
    if s.ann.get(A.MCO_LABEL) != told:
        s.plan.actions.append(Write("create", events.notice(
            s.d.pool, mcolabel.REASON, told, told, rfc3339(s.now), s.ann.get(A.TRANSITION, ""),
            kind="Warning")))
        patch_annotations(s.plan, s.d.pool, {A.MCO_LABEL: told})
    s.plan.notes.append(told)               # said by every command, the record unchanged or not
    s.plan.state_after, s.plan.message = A.BLOCKED, told

