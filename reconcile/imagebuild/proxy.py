"""The cluster-wide proxy and trust bundle (config.openshift.io/v1 Proxy `cluster`): builds get
the proxy settings (env on the Pod; env and build args on the Build) and trust the additional CA
bundle like an `internal-ca` input."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NAME = "cluster"
TRUST_NAMESPACE = "openshift-config"
TRUST_KEY = "ca-bundle.crt"
MOUNT = "/etc/ocl/inputs/cluster-ca"
_FIELDS = (("httpProxy", "HTTP_PROXY"), ("httpsProxy", "HTTPS_PROXY"), ("noProxy", "NO_PROXY"))
#: the userinfo of a URL (`http://user:password@proxy:3128`): a proxy's credentials. A build takes
#: such a value by reference (core/desired); diff and render never show one (diff/masking). It runs
#: to the last `@` of the authority (which ends at `/`, `?`, `#` or whitespace), as Go's net/url
#: (`parseAuthority`) and curl read it: a password may hold an `@`.
USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]+@")


def credentialed(value: str) -> bool:
    return bool(USERINFO.search(value))


@dataclass(frozen=True)
class ClusterProxy:
    env: tuple[tuple[str, str], ...] = ()        # (name, value), upper and lower case both
    trusted_ca: str | None = None                # name of the ConfigMap in openshift-config


def from_object(proxy: Mapping[str, Any] | None) -> ClusterProxy:
    if not proxy:
        return ClusterProxy()
    status = proxy.get("status") or {}
    env = []
    for field, var in _FIELDS:
        value = (status.get(field) or "").strip()
        if value:
            env += [(var, value), (var.lower(), value)]
    ca = ((proxy.get("spec") or {}).get("trustedCA") or {}).get("name") or None
    return ClusterProxy(tuple(env), ca)
