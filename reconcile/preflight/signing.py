"""Signed images (docs/signing.md): the ClusterImagePolicy for our repository is there, its key is
one the builds sign with, and each pool's rendered config carries it in policy.json (what the
MCO's container-runtime-config controller writes for the nodes)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import decision
from reconcile.imagebuild import signing
from reconcile.imagebuild.settings import BUILD_CONFIG, Settings
from reconcile.preflight.facts import Facts
from reconcile.preflight.report import FAIL, OK, WARN, Line

_COMPONENT = "kustomize/components/image-policy (docs/signing.md, \"Turning signing on\")"


def _covering(f: Facts) -> list[Mapping[str, Any]]:
    names = set(signing.covering(f.image_policies or [], f.settings.repo))
    return [p for p in f.image_policies or [] if objects.name(p) in names]


def check_image_policy(f: Facts) -> list[Line]:
    """Is a ClusterImagePolicy for our repository there, and may it be (every pool's image signed)?"""
    if not isinstance(f.settings, Settings):
        return []
    if f.image_policies_error:
        return [(WARN, f"cannot list ClusterImagePolicies: {f.image_policies_error}",
                 "run preflight as a user who may (oc get clusterimagepolicies)")]
    found = _covering(f)
    names = ", ".join(objects.name(p) for p in found)
    if not f.settings.signs:
        if found:
            return [(FAIL, f"signing is off, but ClusterImagePolicy {names} requires signatures for "
                           f"{f.settings.repo}: every pool is Blocked (a new image would degrade the nodes)",
                     f"set {signing.KEY_SECRETS!r} in ConfigMap {BUILD_CONFIG} again, or delete the policy")]
        return [(OK, f"signing is off ({signing.KEY_SECRETS!r} unset) and no ClusterImagePolicy covers "
                     f"{f.settings.repo}", "")]
    unsigned = sorted(objects.name(p) for p in f.pools if decision.opted_in(p)
                      and objects.annotations(p).get(A.IMAGE)
                      and not signing.signed_with(objects.annotations(p).get(A.SIGNED),
                                                  objects.annotations(p)[A.IMAGE], f.settings.signing_keys))
    if not found:
        if unsigned:
            return [(WARN, f"signing is on; no ClusterImagePolicy covers {f.settings.repo} yet, and pool(s) "
                           f"{', '.join(unsigned)} use an image not yet recorded as signed with every key",
                     "wait until the runs record ocl-reconciler.io/signed on every pool, then apply "
                     + _COMPONENT)]
        return [(WARN, f"signing is on, but no ClusterImagePolicy covers {f.settings.repo}: nodes still "
                       "boot unsigned images from it", "every pool's image is signed: apply " + _COMPONENT)]
    if unsigned:
        return [(FAIL, f"ClusterImagePolicy {names} covers {f.settings.repo}, but pool(s) "
                       f"{', '.join(unsigned)} use an image not recorded as signed with every key: their "
                       "nodes refuse it on their next rebase",
                 "wait for the runs to sign it (ocl-reconcile explain POOL), or remove the policy until "
                 "they did")]
    return [(OK, f"ClusterImagePolicy {names} covers {f.settings.repo}, and every pool's image is signed",
             "")]


def check_policy_key(f: Facts) -> list[Line]:
    """Is each covering policy's key one the builds sign with?"""
    if not isinstance(f.settings, Settings) or f.image_policies_error:
        return []
    if not f.settings.signs or not _covering(f):
        return [(OK, "no ClusterImagePolicy with signing on: no key to compare", "")]
    ours = {k.fingerprint: k.secret for k in f.settings.signing_keys}
    out: list[Line] = []
    for policy in _covering(f):
        name = objects.name(policy)
        key = signing.policy_key(policy)
        printed = signing.fingerprint(key) if key else None
        if printed is None:
            out.append((FAIL, f"ClusterImagePolicy {name}: no PublicKey rootOfTrust with a PEM key: the "
                              "builds sign with a key, so the nodes would refuse their images",
                        "use policyType PublicKey with cosign.pub of the key Secret (docs/signing.md)"))
        elif printed in ours:
            out.append((OK, f"ClusterImagePolicy {name}: its key is Secret {ours[printed]}'s "
                            f"({printed[:19]}...)", ""))
        else:
            out.append((FAIL, f"ClusterImagePolicy {name}: its key ({printed[:19]}...) is none the builds "
                              f"sign with ({', '.join(ours.values())})",
                        f"rotating? name both key Secrets in {signing.KEY_SECRETS!r} first (docs/signing.md, "
                        "\"Rotating the key\")"))
    return out


def _identity_refused(identity: Any, repo: str) -> str:
    """"" when a requirement's `signedIdentity` accepts the builds' signatures for `<repo>@<digest>`,
    else the rule's name. cosign claims the repository alone (sigstore/sigstore payload.go,
    `SimpleContainerImage`): `matchRepository` accepts it, and `exactRepository` naming `repo`; the
    others refuse a claim without a tag or digest (containers/image
    signature/policy_reference_match.go), `matchRepoDigestOrExact` also where the rule is absent
    (containers-policy.json(5): its default)."""
    kind = identity.get("type") if isinstance(identity, Mapping) else None
    if kind == "matchRepository" or (kind == "exactRepository" and identity.get("dockerRepository") == repo):
        return ""
    return str(kind or "matchRepoDigestOrExact")


def _specificity(scope: str) -> tuple[bool, int]:
    """containers/image applies the requirements of the most specific scope alone: the repository,
    then each namespace, the host, then `*.` domains (docker/policyconfiguration/naming.go,
    `DockerReferenceNamespaces`): of the scopes covering a repository the longer wins, a wildcard last."""
    return (not scope.startswith("*."), len(scope))


def _requirement(policy_json: str, repo: str) -> tuple[str, list[Mapping[str, Any]]]:
    """The most specific docker scope of policy.json covering `repo` and its sigstoreSigned
    requirements (every one applies); ("", []) where none."""
    try:
        doc = json.loads(policy_json)
    except ValueError:
        return "", []
    scopes = ((doc.get("transports") or {}).get("docker") or {}) if isinstance(doc, Mapping) else {}
    found = [s for s, r in scopes.items() if signing.covers(s, repo) and isinstance(r, list)]
    if not found:
        return "", []
    scope = max(found, key=_specificity)
    return scope, [r for r in scopes[scope] if isinstance(r, Mapping) and r.get("type") == "sigstoreSigned"]


def _refusals(required: list[Mapping[str, Any]], ours: set[str], repo: str) -> list[str]:
    """What in these requirements refuses an image the builds signed: a key not theirs (all are
    required), an identity rule that refuses cosign's claim."""
    out = []
    for r in required:
        root = {"rootOfTrust": {"publicKey": {"keyData": r.get("keyData")}}}
        key = signing.policy_key({"spec": {"policy": root}})
        printed = signing.fingerprint(key) if key else None
        if printed not in ours:
            out.append(f"a key none the builds sign with ({printed[:19]}...)" if printed else "no PEM key")
        refused = _identity_refused(r.get("signedIdentity"), repo)
        if refused:
            out.append(f"signedIdentity {refused}, which refuses their signatures (cosign names the "
                       "repository alone)")
    return out


def check_rendered_policy(f: Facts) -> list[Line]:
    """Does each opted-in pool's rendered config carry the policy's key in policy.json?"""
    if not isinstance(f.settings, Settings) or f.image_policies_error:
        return []
    if not f.settings.signs or not _covering(f):
        return [(OK, "no ClusterImagePolicy with signing on: no pool's policy.json to look at", "")]
    ours = {k.fingerprint for k in f.settings.signing_keys}
    out: list[Line] = []
    for pool in sorted(f.pools, key=objects.name):
        if not decision.opted_in(pool):
            continue
        name, rendered = objects.name(pool), decision.rendered_config(pool)
        if name in f.rendered_policy_errors:
            out.append((WARN, f"pool {name}: cannot read {rendered}: {f.rendered_policy_errors[name]}", ""))
            continue
        scope, required = _requirement(f.rendered_policies.get(name, ""), f.settings.repo)
        refusals = _refusals(required, ours, f.settings.repo)
        if required and not refusals:
            out.append((OK, f"pool {name}: {rendered} requires our signature for {f.settings.repo} in "
                            "/etc/containers/policy.json", ""))
        elif refusals:
            out.append((FAIL, f"pool {name}: {rendered} requires for {f.settings.repo} (scope {scope} of "
                              f"/etc/containers/policy.json) {'; '.join(refusals)}: its nodes would refuse "
                              "every image the builds sign",
                        "every ClusterImagePolicy covering the repository must hold a key of "
                        f"{signing.KEY_SECRETS!r} and signedIdentity MatchRepository (docs/signing.md, "
                        "\"Which identity rule\"); then wait for the pool to render it"))
        else:
            out.append((WARN, f"pool {name}: {rendered} has no sigstoreSigned requirement with our key for "
                              f"{f.settings.repo} in /etc/containers/policy.json yet",
                        "the MCO renders the ClusterImagePolicy into every pool's config: wait for the pool "
                        "to render (oc get mcp), or see the machine-config-controller's log"))
    return out
