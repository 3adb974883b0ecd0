"""Job and pod fields from the pinned Kubernetes OpenAPI: the index, and typos found below replicatedJobs."""

import pytest

from trainyard.controller.strict import job_spec_unknown_fields
from trainyard.toolchain.k8s_fields import MAP, build_index, field_index, pinned_job_fields, unknown_fields

from builders import runtime


def ref(name):
    return {"allOf": [{"$ref": f"#/components/schemas/{name}"}]}


OPENAPI = {"components": {"schemas": {
    "Root": {"properties": {"template": ref("Pod"), "count": {"type": "integer"}}},
    "Pod": {"properties": {"containers": {"type": "array", "items": ref("Container")},
                           "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
                           "raw": ref("Raw")}},
    "Container": {"properties": {"name": {"type": "string"}, "image": {"type": "string"}}},
    "Raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}}}


def test_index_follows_refs_lists_and_maps_and_leaves_opaque_objects_open():
    index = build_index(OPENAPI, "Root")
    assert index == {"Root": {"template": "Pod", "count": None},
                     "Pod": {"containers": ["[]", "Container"], "nodeSelector": MAP, "raw": "Raw"},
                     "Container": {"name": None, "image": None}}
    value = {"count": 1, "template": {"containers": [{"name": "a", "imagee": "x"}], "nodeSelector": {"any": "key"},
                                      "raw": {"anything": 1}, "nodeSelectorr": {}}}
    assert sorted(unknown_fields(value, "Root", index, "spec")) == [
        ("spec.template.containers[0].imagee", "image"), ("spec.template.nodeSelectorr", "nodeSelector")]


def node_job(job_spec: dict) -> dict:
    """Replicated job "node" of exactly `job_spec` (builders.job adds an ancestor label and metadata)."""
    return {"name": "node", "template": {"spec": job_spec}}


POD = "spec.template.spec.replicatedJobs[0].template.spec"


@pytest.mark.parametrize("job_spec,expected", [
    ({"template": {"spec": {"schedulerNamee": "volcano", "containers": [{"name": "node", "image": "i"}]}}},
     [(f"{POD}.template.spec.schedulerNamee", "'schedulerName'")]),
    ({"backoffLimitt": 3, "template": {"spec": {"containers": [{"name": "node"}]}}}, [(f"{POD}.backoffLimitt", "'backoffLimit'")]),
    ({"template": {"spec": {"containers": [{"name": "node", "imagePullPolicyy": "Always"}]}}},
     [(f"{POD}.template.spec.containers[0].imagePullPolicyy", "'imagePullPolicy'")]),
    ({"parallelism": 2, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
        "schedulerName": "volcano", "nodeSelector": {"x": "y"}, "containers": [{
            "name": "node", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 8}}, "env": [{"name": "A", "value": "1"}]}]}}},
     []),
])
def test_typos_below_a_replicated_jobs_spec_are_refused_with_the_closest_field(job_spec, expected):
    assert field_index() is not None, "the index of the pinned Kubernetes OpenAPI could not be built"
    errors = job_spec_unknown_fields(runtime([node_job(job_spec)]), True, pinned_job_fields())
    assert [(e.field, str(e).split("did you mean ")[1].split("?")[0]) for e in errors] == expected
    assert all("the API server would drop it silently" in str(e) for e in errors)


def test_runtime_patches_of_a_trainjob_are_checked_too():
    trainjob = {"kind": "TrainJob", "spec": {"runtimePatches": [{"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {"schedulerNamee": "x"}}}}}]}}}}]}}
    (error,) = job_spec_unknown_fields(trainjob, False, pinned_job_fields())
    assert error.field == ("spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec"
                           ".template.spec.schedulerNamee")


def test_catalog_lint_reports_the_typo():
    from trainyard.runtimes.lint import check_schema, load_controller_checks

    pod = {"schedulerNamee": "volcano", "containers": [{"name": "node", "image": "i"}]}
    rt = runtime([node_job({"template": {"spec": pod}})])
    findings = [str(f) for f in check_schema(rt, load_controller_checks())]
    assert any("Kubernetes schema" in f and "schedulerNamee" in f for f in findings), findings


def test_json_copy_is_a_deep_copy_of_json_shaped_data():
    import datetime

    from trainyard.k8s import json_copy

    when = datetime.datetime(2026, 1, 1)
    original = {"a": [{"b": 1}, [2, {"c": None}]], "d": "x", "e": 1.5, "f": True, "when": when}
    copied = json_copy(original)
    assert copied == original
    copied["a"][0]["b"] = 9
    copied["a"][1][1]["c"] = "changed"
    assert original["a"] == [{"b": 1}, [2, {"c": None}]], "nothing shared but immutable leaves"
    assert copied["when"] is when
