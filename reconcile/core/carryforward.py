"""Records that earlier versions and installs wrote, carried forward: a pool's record under a build id
an earlier version gave the same inputs (it wrote no architecture, `desired.legacy_build_ids`), and
one an install in the MCO's namespace wrote (docs/namespace.md, "Moving an install"). What they say
enters `decide` as two fields of its `Observation` (`observe`); the rest is the words the actions
use for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconcile.contract import annotations as A
from reconcile.core import desired
from reconcile.imagebuild.builders.base import Builder
from reconcile.imagebuild.settings import MCO_NAMESPACE, Settings


@dataclass(frozen=True)
class Carried:
    """The `Observation` fields the pool's record gives, earlier records counted."""
    #: the record is about the current build (and attempt), or is a failure the install in the
    #: MCO's namespace recorded for these inputs
    at_ref: bool
    #: the record is about the build an earlier version or install named for the current inputs
    legacy_ref: bool


def carried(ann: Mapping[str, str], builder: Builder, settings: Settings, inp: desired.BuildInputs,
            ref: str) -> Carried:
    """What the pool's annotations `ann` say about the build `ref` of the inputs `inp`."""
    # an earlier version's record (it wrote no architecture) under an id it gave these inputs, or
    # an earlier install's in the MCO's namespace (docs/namespace.md, "Moving an install")
    attempts = range(1, A.MAX_ATTEMPTS + 1)
    there = {desired.build_ref(builder, MCO_NAMESPACE, inp, n) for n in attempts}
    ids = (inp.build_id, *(desired.legacy_build_ids(inp, settings) if A.ARCH not in ann else ()))
    legacy = ({desired.build_ref(builder, ns, inp, n, old) for ns in (settings.namespace, MCO_NAMESPACE)
               for old in ids for n in attempts}) - {ref}
    # a failure the install in the MCO's namespace recorded for these inputs stays a failure (no
    # automatic retry: a new rebuild token asks for one), as it would have there
    failed_there = ann.get(A.STATE) in (A.FAILED, A.INTERRUPTED) and ann.get(A.BUILD) in there
    return Carried(at_ref=ann.get(A.BUILD) == ref or failed_there,
                   legacy_ref=ann.get(A.BUILD) in legacy and ann.get(A.RENDERED) == inp.rendered_config)


def moved_from(ann: Mapping[str, str], namespace: str) -> str:
    """The namespace of the build the pool's record names, when it is not ours (an install that
    lived in the MCO's namespace): "" otherwise."""
    parts = (ann.get(A.BUILD) or "").split("/")
    return parts[1] if len(parts) == 3 and parts[1] != namespace else ""


def why_kept(ann: Mapping[str, str], namespace: str, image: str, build_id: str) -> str:
    """EQUIVALENT on an earlier record (`legacy_ref`): why its image is kept."""
    if moved_from(ann, namespace):
        return (f"kept {image}: an install of ocl-reconciler in {moved_from(ann, namespace)} "
                f"built it for these inputs")
    return (f"kept {image}: an earlier version of ocl-reconciler built it for these inputs "
            f"(its build id is {build_id} now)")


def not_followed(ann: Mapping[str, str], ref: str | None) -> str:
    """A pending build of the install in another namespace, for the same build id as `ref`: not
    followed from here, built again ("" for any other build)."""
    old, ref = ann.get(A.BUILD) or "", ref or ""
    namespace = ref.split("/")[1] if ref.count("/") == 2 else ""
    moved = moved_from(ann, namespace) if namespace else ""
    if moved and old.split("/")[2] == ref.split("/")[2]:
        return f"{old}, of the install in {moved}, is not followed from here: built again in {namespace}"
    return ""
