"""A mixed pool's build (its nodes of several architectures): one build per architecture, then one
image index over their images (imagebuild/platform/imageindex.py), which becomes the pool's image.

- Each architecture's build is the one a pool of that architecture alone would make: the pool's
  inputs with `arch` that one (`parts`), so the same build id, its objects named and labelled by
  it, its image recorded in the history under it, its Pod on a node of that architecture. A pool
  that gains or loses an architecture therefore builds only the new one: the others' images are in
  the history under unchanged ids and are reused (checked in the registry as any reuse).
- The pool's own build id hashes all the architectures (`arch` = `amd64,arm64`); its record
  (`ocl-reconciler.io/build`) names the index, `ImageIndex/<namespace>/ocl-index-<pool>-<id>`,
  which is no Kubernetes object.
- `aggregate` reads the parts as one build status for the lifecycle table
  (core/transitions.py): Failed, naming the architecture, when one failed for good (the others'
  builds are kept and reused by the next attempt); Succeeded, with the index's digest, when every
  architecture has its image and the registry described each; else Pending or Building, saying
  each architecture's state. A part that failed for a transient reason is retried on its own
  (another attempt of that architecture alone, up to ocl-reconciler.io/attempt's bound), not the
  pool.
- Each build's FROM is its architecture's instance of the release's base image, by digest, as the
  shell resolved it from the list (the build id hashes the list's digest, which fixes every instance).
- The index is pushed by the run (a registry write of the pool's plan) before it is signed or
  recorded; its bytes are fixed by its instances, so a rollback that reuses every instance makes
  the same index, with the same digest.

Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.core import desired, images
from reconcile.core.storage import disk
from reconcile.imagebuild.builders.base import Builder, BuildStatus
from reconcile.imagebuild.platform import architecture, imageindex


@dataclass(frozen=True)
class Part:
    """One architecture's build: its inputs, its latest build object and that object's status, the
    image the history says its build id produced (a candidate for reuse) with the registry's answer,
    and its image as the registry described it (`instance`), once the shell asked."""
    arch: str
    inputs: desired.BuildInputs
    attempt: int = 1
    build_obj: Mapping[str, Any] | None = None
    status: BuildStatus | None = None
    candidate: str | None = None
    lookup: images.Lookup | None = None
    instance: imageindex.Instance | None = None
    #: why the shell could not describe its image (a registry error): the index waits
    unread: str = ""
    #: when its build is to be made: its architecture's instance of the base image, by digest, as
    #: the shell resolved it from the release's list ("": not resolved, and FROM names the list,
    #: whose instance buildah picks for the platform it builds; `base_why` says why)
    base: str = ""
    base_why: str = ""
    #: the size of that instance, when the shell asked (its build's disk and volume: core/storage/)
    size: disk.BaseSize | None = None

    @property
    def build_id(self) -> str:
        return self.inputs.build_id

    @property
    def reused(self) -> bool:
        return self.status is None and self.lookup is not None and bool(self.lookup.found)

    def image(self, repo: str) -> str | None:
        """Its image, once built (or found to reuse)."""
        if self.status is not None and self.status.state == A.SUCCEEDED and self.status.digest:
            return f"{repo}@{self.status.digest}"
        return self.candidate if self.reused else None

    @property
    def failed(self) -> bool:
        """Failed for good: not transient, or at the last attempt."""
        return self.status is not None and self.status.state == A.FAILED and \
            (not self.status.transient or self.attempt >= A.MAX_ATTEMPTS)

    @property
    def needs_object(self) -> bool:
        """A build object is to be made: none yet and nothing to reuse, or the next attempt."""
        if self.status is None:
            return not self.reused and (self.candidate is None or self.lookup is not None)
        return self.status.state == A.FAILED and self.status.transient and self.attempt < A.MAX_ATTEMPTS

    @property
    def next_attempt(self) -> int:
        return self.attempt + 1 if self.status is not None else 1


def is_mixed(inp: desired.BuildInputs | None) -> bool:
    return inp is not None and architecture.mixed(inp.arch)


def part_ids(inp: desired.BuildInputs) -> frozenset[str]:
    return frozenset(replace(inp, arch=a).build_id for a in architecture.split(inp.arch))


def _attempt_of(obj: Mapping[str, Any]) -> int:
    try:
        return max(1, min(A.MAX_ATTEMPTS, int(objects.annotations(obj).get(A.ATTEMPT) or 1)))
    except ValueError:
        return 1


def parts(pool: Mapping[str, Any], inp: desired.BuildInputs, builder: Builder,
          current: Iterable[Mapping[str, Any]], repo: str, now: Any = None) -> tuple[Part, ...]:
    """Each architecture's part: its latest build object of ours (the highest attempt whose name
    is the one that attempt has), else the image its build id produced by the history, when it is
    in our repository."""
    current = list(current)
    out = []
    for arch in architecture.split(inp.arch):
        sub = replace(inp, arch=arch)
        mine = [o for o in current if o.get("kind") == builder.kind
                and objects.labels(o).get(naming.BUILD_ID_LABEL) == sub.build_id
                and objects.name(o) == desired.build_name(sub, _attempt_of(o))]
        latest = max(mine, key=_attempt_of, default=None)
        found = images.produced(pool, sub.build_id) if latest is None else None
        out.append(Part(arch, sub, _attempt_of(latest) if latest is not None else 1, latest,
                        builder.read_status(latest, now) if latest is not None else None,
                        found if found and images.ours(found, repo) else None))
    return tuple(out)


#: What a snapshot run takes each image's manifest to be (it asks no registry): the index it shows
#: has the right entries, not the digest a live run pushes.
SIMULATED_SIZE = 1


def simulated(part: Part, image: str) -> imageindex.Instance:
    return imageindex.Instance(part.arch, image.partition("@")[2], imageindex.INSTANCE_TYPES[0],
                               SIMULATED_SIZE, part.arch)


def runs_on(part: Part, items: Iterable[Part], emulated: frozenset[str]) -> str:
    """The architecture of the node a part's build runs on: its own, or for an architecture the
    settings build under emulation (emulatedArchitectures), the first of the pool's that is not
    emulated. Raises desired.Blocked when every one is."""
    if part.arch not in emulated:
        return part.arch
    native = [p.arch for p in items if p.arch not in emulated]
    if not native:
        raise desired.Blocked(f"emulatedArchitectures names every architecture of the pool "
                              f"({', '.join(p.arch for p in items)}): an emulated build runs on a node of "
                              "another of the pool's architectures; leave one out")
    return native[0]


def index_of(items: Iterable[Part]) -> imageindex.Index | None:
    """The index, once every part's image is described. Raises imageindex.Unfit."""
    items = list(items)
    if not all(p.instance is not None for p in items):
        return None
    return imageindex.compose(p.instance for p in items)


def state(p: Part) -> str:
    """The architecture's build state, one of the pool states (metrics: `ocl_architecture_builds`)."""
    if p.reused:
        return A.SUCCEEDED
    if p.status is None:
        return A.PENDING
    if p.status.state == A.FAILED and not p.failed:
        return A.PENDING                        # its next attempt is made this run
    return p.status.state


def _said(p: Part, repo: str) -> str:
    if p.reused:
        return f"{p.arch}: reusing {p.candidate}"
    if p.status is None:
        return f"{p.arch}: to build"
    if p.status.state == A.SUCCEEDED and p.unread:
        return f"{p.arch}: built {p.image(repo)}, not described yet: {p.unread}"
    if p.status.state == A.SUCCEEDED:
        return f"{p.arch}: built {p.image(repo)}"
    if p.status.state == A.FAILED and not p.failed:
        return f"{p.arch}: attempt {p.next_attempt} of {A.MAX_ATTEMPTS} after: {p.status.message}"
    if p.status.state == A.FAILED and p.status.transient:
        return f"{p.arch}: failed after {p.attempt} attempts: {p.status.message}"
    return f"{p.arch}: " + (p.status.message or p.status.state)


def _each(items: list[Part], repo: str, lead: str = "") -> str:
    """What each part says, in one line of at most 512 characters (the pool's message,
    contract/annotations.py `one_line`): what does not fit is cut from the longest, in the middle,
    so that every architecture and the end of its reason (a Go error chain's cause) show."""
    said = [" ".join(_said(p, repo).split()) for p in items]
    room, shares = 512 - len(lead) - 2 * (len(said) - 1), {}
    for i in sorted(range(len(said)), key=lambda i: len(said[i])):        # the shortest keep theirs
        shares[i] = min(len(said[i]), room // (len(said) - len(shares)))
        room -= shares[i]
    return lead + "; ".join(A.one_line(text, shares[i], keep_end=True) for i, text in enumerate(said))


def aggregate(items: Iterable[Part], repo: str) -> BuildStatus | None:
    """The parts as one build status (None: nothing built or reused yet, so the pool starts)."""
    items = list(items)
    if all(p.status is None and not p.reused for p in items):
        return None
    failed = [p for p in items if p.failed]
    if failed:
        return BuildStatus(A.FAILED, message=_each(failed, repo, "no image index: "))
    try:
        index = index_of(items)
    except imageindex.Unfit as err:
        return BuildStatus(A.FAILED, message=A.one_line(f"no image index: {err}"))
    if index is not None:
        return BuildStatus(A.SUCCEEDED, digest=index.digest)
    busy = any(p.status is not None and p.status.state == A.BUILDING for p in items) or \
        any(p.image(repo) for p in items)
    return BuildStatus(A.BUILDING if busy else A.PENDING, message=_each(items, repo))


def history(pool: Mapping[str, Any], build_id: str, image: str, items: Iterable[Part], repo: str) -> str:
    """The image history once the index `image` succeeded: the index under the pool's build id,
    then each architecture's image under its own (reusable by a pool of that architecture, or by
    this pool after a change of its architectures)."""
    return images.recorded(pool, build_id, image,
                           [(p.build_id, found) for p in items if (found := p.image(repo))])
