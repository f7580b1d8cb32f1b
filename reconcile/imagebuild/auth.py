"""Registry credentials for a build: the configured pull or push secret, converted from the legacy
`kubernetes.io/dockercfg` form and merged with labelled `pull-secret`/`push-secret` inputs when
there is anything to convert or merge (as the MCO canonicalises legacy secrets). The result is a
Secret we own, per build; otherwise the configured secret is used as it is. Values stay in Secrets.

The Secrets the settings name: where each is (`secret_location`), where its name comes from
(`secret_origin`), and whether it can serve registry auth at all (`check_secret`)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any

from reconcile.imagebuild import settings

DOCKERCONFIGJSON = "kubernetes.io/dockerconfigjson"
_KEYS = (".dockerconfigjson", ".dockercfg", "docker.json", "docker.cfg")


class AuthError(ValueError):
    """The secret holds no usable registry auth; the message names it, never its content."""


def auths(secret: Mapping[str, Any]) -> dict[str, Any]:
    """The `auths` map of a dockerconfigjson, dockercfg (legacy: the map itself) or cosa secret."""
    data = secret.get("data") or {}
    name = (secret.get("metadata") or {}).get("name", "?")
    for key in _KEYS:
        if key not in data:
            continue
        try:
            parsed = json.loads(base64.b64decode(data[key], validate=True) or b"null")
        except ValueError:
            raise AuthError(f"Secret {name}: key {key} is not base64-encoded JSON") from None
        if not isinstance(parsed, dict) or not parsed:
            raise AuthError(f"Secret {name}: key {key} is empty or not a JSON object")
        if isinstance(parsed.get("auths"), dict):
            return dict(parsed["auths"])
        if key in (".dockercfg", "docker.cfg"):
            return dict(parsed)
        raise AuthError(f"Secret {name}: key {key} has no \"auths\" object")
    raise AuthError(f"Secret {name} has none of the keys {', '.join(_KEYS)}")


#: Docker Hub's names: one registry to containers/image (normalizeRegistry)
_DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")


def host_and_path(repo: str) -> tuple[str, str]:
    """A repository's registry host and path in it, as distribution/reference splits a name: the
    first component is a host if it has a `.` or `:`, is `localhost`, or has an upper-case letter;
    else the name is Docker Hub's (`docker.io`, official images under `library/`)."""
    host, _, path = repo.partition("/")
    if not path or ("." not in host and ":" not in host and host != "localhost" and host == host.lower()):
        host, path = "docker.io", repo
    if host in _DOCKER_HUB:
        host, path = "docker.io", path if "/" in path else f"library/{path}"
    return host, path


def _registry_of(key: str) -> str:
    """An `auths` key as containers/image normalises it when no key matched exactly
    (pkg/docker/config/config.go normalizeAuthFileKey): a key with a scheme stands for its whole
    registry (docker's legacy `https://index.docker.io/v1/`); Docker Hub's names are one."""
    stripped = key.removeprefix("http://").removeprefix("https://")
    if stripped != key:
        stripped = stripped.split("/", 1)[0]
    return "docker.io" if stripped in _DOCKER_HUB else stripped


def key_for(auths: Mapping[str, Any], repo: str) -> str | None:
    """The `auths` key whose credentials a client uses for this repository, as containers/image
    finds them (findCredentialsInFile): a key equal to the repository, then to each parent path,
    then to the host; failing that, a key that normalises to the host (the first in key order:
    upstream takes whichever a Go map gives first). None: anonymous. The build (buildah), our
    registry client and preflight all find credentials so."""
    host, path = host_and_path(repo)
    parts = [host, *path.split("/")]
    for n in range(len(parts), 0, -1):
        if "/".join(parts[:n]) in auths:
            return "/".join(parts[:n])
    return next((str(k) for k in sorted(auths, key=str) if _registry_of(str(k)) == host), None)


def needs_own(secret: Mapping[str, Any], extras: Iterable[Mapping[str, Any]]) -> bool:
    return secret.get("type") != DOCKERCONFIGJSON or ".dockerconfigjson" not in (secret.get("data") or {}) \
        or any(True for _ in extras)


def merged(secret: Mapping[str, Any], extras: Iterable[Mapping[str, Any]]) -> str:
    """base64 of the merged dockerconfigjson: the configured secret's entries win on a clash."""
    combined: dict[str, Any] = {}
    for extra in extras:
        combined.update(auths(extra))
    combined.update(auths(secret))
    text = json.dumps({"auths": dict(sorted(combined.items()))}, sort_keys=True)
    return base64.b64encode(text.encode()).decode()


def secret_location(namespace: str, ref: str) -> tuple[str, str]:
    """(namespace, name) of a secret reference: `name` in our namespace, or `namespace/name`."""
    ns, _, name = ref.rpartition("/")
    return ns or namespace, name


def secret_origin(settings_key: str, namespace: str, secret_name: str) -> str:
    """Where the Secret's name comes from, for a message: the key, or for the global pull secret
    the key's absence (the key set to that same name reads the same: harmless)."""
    if (settings_key == "baseImagePullSecretName"
            and f"{namespace}/{secret_name}" == settings.GLOBAL_PULL_SECRET):
        return f"the global pull secret: {settings.BUILD_CONFIG} sets no {settings_key!r}"
    return f"from {settings.BUILD_CONFIG} key {settings_key!r}"


def check_secret(settings_key: str, secret_name: str, secret: Mapping[str, Any] | None,
                 namespace: str) -> None:
    """The build needs registry auth from each secret (dockerconfigjson, or legacy dockercfg that
    we convert); say clearly when that cannot work. Values are looked at, never put in a message."""
    origin = secret_origin(settings_key, namespace, secret_name)
    if secret is None:
        raise settings.SettingsError(f"Secret {namespace}/{secret_name} ({origin}) not found")
    data = secret.get("data") or {}
    if not {".dockerconfigjson", ".dockercfg"} & set(data):
        kind = secret.get("type", "Opaque")
        raise settings.SettingsError(f"Secret {namespace}/{secret_name} ({origin}) is of type {kind} "
                                     f"without key .dockerconfigjson; want type {DOCKERCONFIGJSON}")
    try:
        auths(secret)
    except AuthError:
        key = ".dockerconfigjson" if ".dockerconfigjson" in data else ".dockercfg"
        raise settings.SettingsError(f"Secret {namespace}/{secret_name}: key {key} is empty "
                                     f"or not a JSON object") from None
