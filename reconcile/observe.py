"""Read the live state once: settings by name, one labelled LIST per kind we create, all pools,
and the rendered MachineConfig only for pools that need a new build."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconcile import lifecycle, naming, settings
from reconcile.cluster import Cluster
from reconcile.settings import Settings, SettingsError

#: Kinds whose objects we create, hence LIST with our selector.
OWNED_KINDS = ("ConfigMap", "Pod")


@dataclass
class Observed:
    settings: Settings | str
    pools: list[dict[str, Any]]
    owned: list[dict[str, Any]]


def read_settings(cluster: Cluster, namespace: str) -> Settings | str:
    cms = {n: cluster.get("ConfigMap", namespace, n) for n in settings.SETTINGS_CONFIGMAPS}
    try:
        found = settings.read(namespace, cms)
        for key, secret in (("baseImagePullSecretName", found.pull_secret),
                            ("finalImagePushSecretName", found.push_secret)):
            settings.check_secret(key, secret, cluster.get("Secret", namespace, secret), namespace)
    except SettingsError as err:
        return str(err)
    return found


def observe(cluster: Cluster, namespace: str) -> Observed:
    owned = [o for kind in OWNED_KINDS for o in cluster.list(kind, namespace, naming.SELECTOR)]
    return Observed(read_settings(cluster, namespace),
                    cluster.list("MachineConfigPool", None), owned)


def plan(cluster: Cluster, seen: Observed, now, only=()) -> list:
    """Plan every pool; fetch the rendered MachineConfigs the first pass asked for, plan again."""
    plans = lifecycle.plan_cluster(seen.settings, seen.pools, seen.owned, now, only=only)
    wanted = sorted({p.needs_machineconfig for p in plans if p.needs_machineconfig})
    if not wanted:
        return plans
    mcs = {n: cluster.get("MachineConfig", "", n) or lifecycle.MISSING for n in wanted}
    return lifecycle.plan_cluster(seen.settings, seen.pools, seen.owned, now, mcs, only=only)
