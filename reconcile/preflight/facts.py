"""What preflight read of a live cluster (`Facts`, filled by preflight/read.py), the model every
check reads; a `*_error` says why a fact could not be read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconcile.contract.problem import Problem
from reconcile.core import storage
from reconcile.imagebuild.settings import Settings
from reconcile.preflight.permissions import RECONCILER_ACCOUNT, Asked

ENFORCE = "pod-security.kubernetes.io/enforce"


@dataclass(frozen=True)
class DryRun:
    """The server's judgement of the desired build object, created with dryRun=All."""
    kind: str
    name: str
    pool: str
    error: str = ""             # "" admitted
    status: int = 0


@dataclass
class Facts:
    """What preflight/read.py read; a `*_error` says why a fact could not be read."""
    namespace: str
    namespace_obj: Mapping[str, Any] | None = None
    namespace_error: str = ""
    #: the CronJob CRONJOB (None: not found, or not read: `cronjob_error`) and the Pods of its Jobs
    cronjob: Mapping[str, Any] | None = None
    cronjob_error: str = ""
    cronjob_pods: list[Mapping[str, Any]] = field(default_factory=list)
    #: None: not read (the ConfigMaps could not be listed: `settings_error`)
    settings: Settings | Problem | None = None
    settings_error: str = ""
    #: settings key -> the Secret as read (None: absent), or the reason it could not be read
    secrets: dict[str, Mapping[str, Any] | None] = field(default_factory=dict)
    secret_errors: dict[str, str] = field(default_factory=dict)
    #: who the permission reviews were asked as, and whether that is our ServiceAccount
    caller: str = ""
    impersonated: bool = False
    access: list[Asked] | None = None
    access_error: str = ""
    builder_account: Mapping[str, Any] | None = None
    builder_account_error: str = ""
    #: may the build Pod's ServiceAccount use BUILDER_SCC (None: not asked: `builder_scc_error`)
    builder_scc: bool | None = None
    builder_scc_error: str = ""
    registry_url: str = ""
    registry_error: str = ""
    registry_ca: str | None = None
    cluster_version: Mapping[str, Any] | None = None
    cluster_version_error: str = ""
    #: None: the MachineOSConfig API is not served
    machineosconfigs: list[Mapping[str, Any]] | None = None
    machineosconfigs_error: str = ""
    pools: list[Mapping[str, Any]] = field(default_factory=list)
    owned: list[Mapping[str, Any]] = field(default_factory=list)
    #: every MachineConfig named like ours, metadata only (rollout: machineconfig): the stray check
    named: list[Mapping[str, Any]] = field(default_factory=list)
    #: pool -> what the next run would do (the lifecycle's transition), or why it is Blocked
    decisions: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: pool -> what stops its rollout (overridden, render failed: core/rollout/check.py), as the plan
    #: leaves it
    rollouts: dict[str, str] = field(default_factory=dict)
    plan_error: str = ""
    dry_run: DryRun | None = None
    dry_run_skipped: str = ""
    #: is the MCO's ValidatingAdmissionPolicy custom-machine-config-pool-selector served (None: the
    #: read failed: `selector_policy_error`)
    selector_policy: bool | None = None
    selector_policy_error: str = ""
    #: with `rollout: machineconfig`: the rollout policy's parameter ConfigMap ROLLOUT_PARAMS as
    #: read (None: not found, or not read: `rollout_params_error`; `rollout_params_read`: asked)
    rollout_params: Mapping[str, Any] | None = None
    rollout_params_error: str = ""
    rollout_params_read: bool = False
    #: with `buildStorage: persistent` and custom-pod-builder: the StorageClasses as a run reads
    #: them when a build is due (None: not read)
    storage_classes: storage.Classes | None = None
    #: the ClusterImagePolicies (None: not read; [] where the API is not served), and per opted-in
    #: pool the policy.json of its rendered config ("" none), read when signing is on and one covers us
    image_policies: list[Mapping[str, Any]] | None = None
    image_policies_error: str = ""
    rendered_policies: dict[str, str] = field(default_factory=dict)
    rendered_policy_errors: dict[str, str] = field(default_factory=dict)
    #: mixed pools (core/multiarch.py): pool -> its architectures and the base image its builds
    #: start from; the nodes (read only when there is one: None otherwise), and for each image they
    #: pull (base, builder) the architectures it offers, or why that could not be read
    architectures: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    nodes: list[Mapping[str, Any]] | None = None
    nodes_error: str = ""
    platforms: dict[str, tuple[str, ...] | str] = field(default_factory=dict)

    def reconciler(self) -> str:
        """Our ServiceAccount, as the lines name it."""
        return f"ServiceAccount {self.namespace}/{RECONCILER_ACCOUNT}"

    def is_reconciler(self) -> bool:
        """Is the caller our ServiceAccount itself?"""
        return self.caller == f"system:serviceaccount:{self.namespace}:{RECONCILER_ACCOUNT}"
