"""The pure core of a run, as a state machine, in the modules of its concepts; this module names
them together for the tests, the bench and anyone reading from the top. Reconcile's own modules
import from where each name lives:

- core/transitions.py: the lifecycle table of docs/contract.md (`Transition`) and `decide`, one
  `match` from an `Observation` to a transition;
- core/decision.py: which pools a run decides (`in_scope`) and, for each, its `Decision`;
- core/carryforward.py: records that earlier versions and installs wrote (legacy build ids, the
  move out of the MCO's namespace), as the `Observation` sees them;
- core/actions/table.py: a transition -> its actions (`ACTIONS`, `act`, `plan_cluster`), one
  function each in core/actions/buildrows.py and core/actions/poolrows.py, on the `Step` of
  core/actions/step.py.
"""

from __future__ import annotations

from reconcile.core.actions.buildrows import not_reused
from reconcile.core.actions.step import rfc3339
from reconcile.core.actions.table import ACTIONS, act, blocked, plan_cluster
from reconcile.core.carryforward import moved_from
from reconcile.core.decision import (
                                     MISSING,
                                     Decision,
                                     Scoped,
                                     content_of,
                                     decide_cluster,
                                     decide_one,
                                     decide_pool,
                                     in_scope,
                                     opted_in,
                                     rendered_config,
                                     rollout_view,
                                     unknown_content,
                                     with_lookup,
)
from reconcile.core.transitions import NEEDS_BUILD, Observation, Transition, decide

__all__ = ["ACTIONS", "MISSING", "NEEDS_BUILD", "Decision", "Observation", "Scoped", "Transition", "act",
           "blocked", "content_of", "decide", "decide_cluster", "decide_one", "decide_pool", "in_scope",
           "moved_from", "not_reused", "opted_in", "plan_cluster", "rendered_config", "rfc3339",
           "rollout_view", "unknown_content", "with_lookup"]
