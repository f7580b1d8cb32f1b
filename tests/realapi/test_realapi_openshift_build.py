"""Issue 22 on the real kube-apiserver (the Build CRD), as the reconciler's ServiceAccount: a Build
that OpenShift's build controller leaves New with GenericBuildFailed (its status written as
openshift/openshift-controller-manager pkg/build/controller/build/build_controller.go writes it:
phase New, reason, "These resources do not exist: ...") is shown on the pool, and past the bound
the pool stops waiting: another attempt, which re-creates what was missing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconcile.contract import annotations as A
from reconcile.imagebuild.builders import build as openshift_build
from tests.support import factory as F

pytestmark = pytest.mark.realapi


def test_a_build_left_new_names_what_is_missing_then_is_tried_again(real, monkeypatch):
    real.seed(F.cluster(settings=[F.build_config(imageBuilderType="openshift-image-builder"), F.osimageurl(),
                                  F.secret("pull-secret"), F.secret("push-secret")]))
    code, err = real.run()
    assert code == 0 and real.ann()[A.STATE] == A.PENDING, err
    obj = real.build_object()
    (mc,) = [o["metadata"]["name"] for o in real.owned() if o["metadata"]["name"].startswith("ocl-mc-")]
    real.api.request("DELETE", real.api.path("ConfigMap", F.NS, mc))           # someone deleted it
    missing = f"These resources do not exist: ConfigMaps [{mc}]"
    obj["status"] = {"phase": "New", "reason": "GenericBuildFailed", "message": missing}
    real.api.write_status(obj)

    created = datetime.strptime(obj["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    monkeypatch.setenv("OCL_RECONCILE_NOW", (created + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    code, err = real.run()
    assert code == 0, err
    a = real.ann()
    assert a[A.STATE] == A.PENDING
    assert a[A.MESSAGE] == f"build Build/{F.NS}/{obj['metadata']['name']} is New: GenericBuildFailed: {missing}"

    later = created + timedelta(seconds=openshift_build.NEW_BOUND_SECONDS + 60)
    monkeypatch.setenv("OCL_RECONCILE_NOW", later.strftime("%Y-%m-%dT%H:%M:%SZ"))
    code, err = real.run()
    assert code == 0, err
    a = real.ann()
    assert a[A.STATE] == A.PENDING and a[A.ATTEMPT] == "2", a
    assert "stayed New for more than 30 minutes after it was created: GenericBuildFailed" in a[A.MESSAGE]
    assert real.api.get("ConfigMap", F.NS, mc) is not None                      # made again for attempt 2
    assert real.build_object()["metadata"]["name"] != obj["metadata"]["name"]
