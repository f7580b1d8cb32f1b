"""The render-controller imitation (tests/support/mcorender.py) replayed on every case the MCO's REAL
render controller was run on (../shared/reference/mco-render/, README there: openshift/machine-config-operator
@ 7ff337a4). Expected values are the real controller's, read from results.json.gz; nothing here is computed
by the imitation first. Cases are read from the files: a case added there is replayed without a change here.

Compared per case and pool: refused or accepted (RenderDegraded), the key phrase of the refusal, the pool's
spec.configuration.source (merge order), and of the rendered MachineConfig its annotations, ownerReferences,
osImageURL, baseOSExtensionsContainerImage, kernelArguments, extensions, kernelType, fips and the decoded
spec.config (file contents decoded from their data URLs, gunzipped where `compression: gzip`).

Not compared (EXCLUDED_FIELDS says why): the rendered name (and so spec.configuration.name and the names in
`actions`), `configSHA256`, `specYAMLName`, and the text of a refusal after its key phrase.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.support import mcorender as R

REF = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "mco-render"
ABSENT = f"{REF} is absent (../shared/reference/mco-render holds the real render controller's results)"

#: fields of a result that are not compared, and why
EXCLUDED_FIELDS = {
    "configurationName": "a hash of go-yaml's bytes of the spec; Python's YAML emitter differs (mcorender)",
    "rendered.name": "the same hash",
    "rendered.specYAMLName": "the same hash",
    "rendered.configSHA256": "a hash of Go's JSON bytes of spec.config; the decoded config is compared instead",
    "actions": "client calls named by the hash; the objects they write are compared instead",
    "mergeOrder": "the order the harness read back, also on refusals; `source` is compared for accepted pools",
    "err (after its key phrase)": "Go's wording of Ignition reports; the phrase before the first ': ' is compared",
}
#: the version the controller under test ran as; MachineConfigs in cases.json.gz say @HASH@ for it
HASH_PLACEHOLDER = "@HASH@"
FAILED = "Failed to render configuration for pool {pool}: "
GENERATING = "could not generate rendered MachineConfig: "


def _load(name: str) -> Any:
    with gzip.open(REF / name, "rt", encoding="utf-8") as fh:
        return json.load(fh)


CASES = {c["name"]: c for c in _load("cases.json.gz")} if REF.is_dir() else {}
RESULTS = _load("results.json.gz") if REF.is_dir() else []


def _params() -> list[Any]:
    if not RESULTS:
        return [pytest.param(None, marks=pytest.mark.skip(reason=ABSENT), id="absent")]
    return [pytest.param(r, id=f"{r['case']}/{r['pool']}") for r in RESULTS]


def controller_version() -> str:
    """The version the real controller stamped on what it rendered (README: the unbuilt default)."""
    versions = {r["rendered"]["annotations"][R.GENERATED_BY] for r in RESULTS if r.get("rendered")}
    assert len(versions) == 1, versions
    return versions.pop()


def _placeheld(obj: Any, version: str) -> Any:
    return json.loads(json.dumps(obj).replace(HASH_PLACEHOLDER, version))


def replay(case: dict[str, Any]) -> list[dict[str, Any]]:
    """One `sync` over the case as a cluster holds it: its objects, the ControllerConfig the harness
    built from baseOSContainerImage / baseOSExtensionsContainerImage, and the OSImageStream when the
    OSStreams gate is on (off: the controller reads none, `getOSImageStreamForPool`)."""
    version = controller_version()
    items = _placeheld(copy.deepcopy(case["objects"]), version)
    items.append({"apiVersion": R.MCO_V1, "kind": "ControllerConfig",
                  "metadata": {"name": "machine-config-controller"},
                  "spec": {"baseOSContainerImage": case["baseOSContainerImage"],
                           "baseOSExtensionsContainerImage": case["baseOSExtensionsContainerImage"]}})
    if case.get("osStreamsGate") and case.get("osImageStream"):
        items.append(_placeheld(case["osImageStream"], version))
    return R.sync(items, controller_version=version, release_version=case["releaseVersion"])


_REPLAYS: dict[str, list[dict[str, Any]]] = {}


def replayed(case_name: str) -> list[dict[str, Any]]:
    if case_name not in _REPLAYS:
        _REPLAYS[case_name] = replay(CASES[case_name])
    return _REPLAYS[case_name]


def _data_url(source: str) -> bytes:
    """RFC 2397, as Ignition's `dataurl` reads it: `;base64` or percent-encoded."""
    head, _, data = source.partition(",")
    assert head.startswith("data:"), source[:40]
    if head.endswith(";base64"):
        return base64.b64decode(data)
    return urllib.parse.unquote_to_bytes(data)


def decoded(config: dict[str, Any]) -> dict[str, Any]:
    """spec.config with each file's contents as the bytes a node gets (never Go's or Python's gzip or
    base64 bytes): a `gzip` compression must gunzip, or the entry says it could not."""
    out = copy.deepcopy(config)
    for f in (out.get("storage") or {}).get("files") or []:
        contents = f.get("contents") or {}
        if "source" not in contents:
            continue
        data = _data_url(contents.pop("source"))
        if contents.pop("compression", None) == "gzip":
            try:
                data = gzip.decompress(data)
            except OSError as err:
                data = f"<does not gunzip: {err}>".encode()
        contents["decoded"] = data.decode("utf-8", "backslashreplace")
    return out


def key_phrase(message: str, pool: str) -> tuple[bool, str]:
    """The RenderDegraded message without syncFailingStatus' prefix: whether it came from generating the
    rendered config, and its text up to the first ': '."""
    prefix = FAILED.format(pool=pool)
    assert message.startswith(prefix), message
    rest = message[len(prefix):]
    generating = rest.startswith(GENERATING)
    rest = rest[len(GENERATING):] if generating else rest
    return generating, rest.split(": ", 1)[0]


def render_degraded(pool: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (pool.get("status") or {}).get("conditions") or []
                 if c.get("type") == "RenderDegraded"), None)


def by_name(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any] | None:
    return next((o for o in items if o.get("kind") == kind and o["metadata"]["name"] == name), None)


SPEC_FIELDS = ("osImageURL", "baseOSExtensionsContainerImage", "kernelArguments", "extensions", "kernelType",
               "fips")


@pytest.mark.parametrize("result", _params())
def test_the_imitation_renders_as_the_real_controller(result):
    out = replayed(result["case"])
    name = result["pool"]
    before = by_name(CASES[result["case"]]["objects"], "MachineConfigPool", name)
    pool = by_name(out, "MachineConfigPool", name)
    cond = render_degraded(pool)

    if result["renderDegraded"] == "":                       # nothing written (a pool selecting all)
        assert cond is None and result["actions"] is None
        assert pool["spec"].get("configuration") == before["spec"].get("configuration")
        return
    assert cond is not None and cond["status"] == result["renderDegraded"]
    if result["err"]:
        assert result["rendered"] is None
        assert key_phrase(cond["message"], name) == key_phrase(result["renderDegradedMessage"], name)
        assert pool["spec"].get("configuration") == before["spec"].get("configuration")
        return

    assert [s["name"] for s in pool["spec"]["configuration"]["source"]] == result["source"]
    rendered = by_name(out, "MachineConfig", pool["spec"]["configuration"]["name"])
    want = result["rendered"]
    assert rendered["metadata"]["annotations"] == want["annotations"]
    assert rendered["metadata"]["ownerReferences"] == want["ownerReferences"]
    for field in SPEC_FIELDS:
        assert rendered["spec"].get(field) == want["spec"].get(field), field
    assert decoded(rendered["spec"]["config"]) == decoded(want["spec"]["config"])


def test_every_case_has_results_and_every_result_a_case():
    """A case the harness ran must be replayed, and a result must not name a case we cannot read."""
    if not RESULTS:
        pytest.skip(ABSENT)
    assert {r["case"] for r in RESULTS} == set(CASES)
    for r in RESULTS:
        assert by_name(CASES[r["case"]]["objects"], "MachineConfigPool", r["pool"]) is not None


def test_the_comparison_can_fail():
    """decoded() sees a kept gzip on plain data, and key_phrase() a different refusal."""
    plain = {"storage": {"files": [{"path": "/a", "contents": {"source": "data:,x"}}]}}
    kept = copy.deepcopy(plain)
    kept["storage"]["files"][0]["contents"]["compression"] = "gzip"
    assert decoded(plain) != decoded(kept)
    zipped = {"storage": {"files": [{"path": "/a", "contents": {
        "compression": "gzip", "source": "data:;base64," + base64.b64encode(gzip.compress(b"x")).decode()}}]}}
    assert decoded(zipped) == decoded(plain)
    assert key_phrase(FAILED.format(pool="p") + GENERATING + "a: b", "p") != key_phrase(
        FAILED.format(pool="p") + "a: b", "p")
