"""The signing gate (docs/signing.md): with signing on, a transition that records an image on the
pool or points our MachineConfig at it (`RECORDS`: a build's success, a reuse or rollback, or an
image kept as built, equivalent or live) goes on only once the pool records that image signed with
every current key (`ocl-reconciler.io/signed`). Until then the pool's transition is SIGN: a signing
Pod (imagebuild/signing/signer.py) signs the digest, and its failure is the pool's, with its reason.

So a newly built image and, when signing is turned on or a key added, the image a pool uses now
are signed before a run records them or writes them into our MachineConfig; turning signing on or
rotating a key builds nothing. Those are images this reconciler built (or reused, checked) and
recorded on the pool. An image found only in the registry, the one a rollback would reuse, is
never signed by us: its build-id label is something anyone who may push can write. It is reused
only if a current key signed it already (`verified`, from the signatures the shell read), else
the pool builds again. Pure: `verified` and `gate` look at the decision only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.core import images
from reconcile.core.transitions import Transition
from reconcile.imagebuild import signing
from reconcile.imagebuild.builders.base import BuildStatus
from reconcile.imagebuild.signing import signatures, signer

#: the transitions that record an image or roll it out
RECORDS = frozenset({Transition.SUCCEED, Transition.REUSE, Transition.BUILT, Transition.EQUIVALENT,
                     Transition.LIVE})
#: of those, the ones whose image is not recorded yet: the pool says Building while it is signed
FRESH = frozenset({Transition.SUCCEED, Transition.REUSE})


@dataclass(frozen=True)
class Signing:
    """SIGN: the image to sign, the transition that goes on once it is, and the signing Pod."""
    image: str
    then: Transition
    pod_name: str
    pod: Mapping[str, Any] | None = None
    status: BuildStatus | None = None
    #: the signing Pod as this run renders it (made when `pod` is None)
    want: Mapping[str, Any] | None = None
    #: `pod` has the name and our labels but runs something else (core/actions/buildrows.py `sign`
    #: deletes it, the next run makes ours): its status is not read
    impostor: bool = False


def image_of(d: Any) -> str:
    """The image a transition of RECORDS records: a build's digest, a reuse's image, else the
    one the pool records."""
    if d.transition is Transition.SUCCEED:
        return f"{d.settings.repo}@{d.status.digest}"
    if d.transition is Transition.REUSE:
        return d.lookup.image
    return objects.annotations(d.pool or {}).get(A.IMAGE, "")


def pod_name(pool: str, image: str, keys: tuple[signing.Key, ...]) -> str:
    """The signing Pod of an image and a set of keys (another key set: another Pod)."""
    which = naming.build_id({"image": image, "keys": signing.fingerprints(keys)})
    return naming.object_name("sign", pool, which)


def render(d: Any, name: str, image: str) -> dict[str, Any]:
    """The signing Pod of decision `d` for `image`."""
    return signer.render(
        name=name, namespace=d.settings.namespace, labels=naming.our_labels(d.pool_name, d.inputs.build_id),
        annotations=naming.our_annotations(d.inputs.rendered_config, wave=1),
        owner=naming.owner_reference(d.pool), image=image,
        keys=tuple(k.secret for k in d.settings.signing_keys), signer_image=d.settings.signer_image,
        push_secret=d.settings.push_secret, recursive=bool(getattr(d, "parts", ())))


def verified(found: Any, lookup: images.Lookup) -> images.Lookup:
    """The registry's answer about a rollback's image, with signing on (`found`: the settings): found
    only if a current key signed that image for our repository (imagebuild/signing/signatures.py), else not
    found, saying why (the pool builds again; nothing is signed). A snapshot run asks no registry:
    its image is taken as there and signed."""
    if found is None or not found.signs or not lookup.found:
        return lookup
    if lookup.simulated:
        return replace(lookup, signed_by=tuple(k.fingerprint for k in found.signing_keys))
    verdict = signatures.verify(lookup.signatures, lookup.image, found.repo, found.signing_keys)
    if not verdict.keys:
        return replace(lookup, found=False, detail=f"{verdict.why}: an image only found in the registry "
                                                   "is reused only if a current key signed it, never signed "
                                                   "by us")
    return replace(lookup, signed_by=verdict.keys)


def _signed(d: Any, image: str, keys: tuple[signing.Key, ...]) -> bool:
    """Is `image` signed with every current key: for a reuse, by the signatures the registry holds
    (`verified`); otherwise by the pool's record, which only this reconciler writes."""
    if d.transition is Transition.REUSE:
        return {k.fingerprint for k in keys} <= set(d.lookup.signed_by)
    return signing.signed_with(objects.annotations(d.pool or {}).get(A.SIGNED), image, keys)


def gate(d: Any) -> Any:
    """The decision `d` (core/decision.py), or SIGN where its image is not signed with every key of
    now; with `signed` set to the record to write once it is (None: signing is off). Only a digest
    of our repository is signed: the pool's image record is an annotation others can write."""
    if d.settings is None or d.transition not in RECORDS:
        return d
    if not d.settings.signs:
        return replace(d, signed=None)
    keys = d.settings.signing_keys
    image = image_of(d)
    if not signing.digest_of(image, d.settings.repo):
        return replace(d, transition=Transition.BLOCKED, signed=None, problem=(
            f"the image the pool records, {image!r}, is not a digest of {d.settings.repo} "
            f"({d.settings.repo}@sha256:...): it is not signed, nor rolled out; set a new rebuild token to "
            f"build and sign one: oc annotate mcp {d.pool_name} {A.REBUILD}=$(date +%s) --overwrite"))
    record = signing.record(image, keys)
    if _signed(d, image, keys):
        return replace(d, signed=record)
    name = pod_name(d.pool_name, image, keys)
    want = render(d, name, image)
    pod = next((o for o in d.current if o.get("kind") == "Pod" and objects.name(o) == name), None)
    impostor = pod is not None and not signer.made_as(pod, want)
    status = signer.read_status(pod) if pod is not None and not impostor else None
    if status is not None and status.state == A.SUCCEEDED:
        return replace(d, signed=record)
    return replace(d, transition=Transition.SIGN, signed=None,
                   signing=Signing(image, d.transition, name, pod, status, want, impostor))
