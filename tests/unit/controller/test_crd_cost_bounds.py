"""The CRDs must fit the API server's CEL cost budget.

The API server estimates a CEL rule's worst-case cost from the sizes of the lists, maps and strings it
can see. An unbounded list above a rule multiplies that rule's cost by a size worked out from the 3 MiB
request limit, so a rule under unbounded lists is refused ("estimated rule cost exceeds budget").
Without a real API server, these checks catch the cause: a list/map with CEL rules under it and no
maxItems/maxProperties, or a string with CEL rules and no maxLength. Every bound is upstream's
(Kubeflow Trainer v2.3, JobSet v0.12), so none rejects something upstream accepts.
"""

import pytest

from trainyard.controller import api
from trainyard.controller.crds import crd_objects
from trainyard.controller.schema import validate

KINDS = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime")

# Lists that upstream itself leaves unbounded even though CEL rules sit beneath them. Bounding them here
# would reject objects upstream accepts. JobSet v0.12's replicatedJobs has no maxItems; its rules
# (dependsOn immutability, the StartupPolicy/DependsOn exclusion) still fit the budget upstream and here.
UPSTREAM_UNBOUNDED_LISTS = {".spec.template.spec.replicatedJobs"}


def schema_of(kind):
    crd = next(c for c in crd_objects() if c["spec"]["names"]["kind"] == kind)
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def children(schema, path):
    for name, sub in schema.get("properties", {}).items():
        yield f"{path}.{name}", sub
    if isinstance(schema.get("items"), dict):
        yield f"{path}[]", schema["items"]
    if isinstance(schema.get("additionalProperties"), dict):
        yield f"{path}{{}}", schema["additionalProperties"]


def nodes(schema, path=""):
    yield path, schema
    for child_path, child in children(schema, path):
        yield from nodes(child, child_path)


def has_cel(schema):
    """CEL rules on this node or anywhere beneath it."""
    return any(sub.get("x-kubernetes-validations") for _, sub in nodes(schema))


def is_transition(rule):
    return "oldSelf" in rule["rule"]


@pytest.mark.parametrize("kind", KINDS)
def test_lists_and_maps_with_cel_beneath_are_bounded(kind):
    unbounded = []
    for path, node in nodes(schema_of(kind)):
        if node.get("type") == "array" and has_cel(node) and "maxItems" not in node and path not in UPSTREAM_UNBOUNDED_LISTS:
            unbounded.append(f"{path} (maxItems)")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and has_cel(extra) and "maxProperties" not in node:
            unbounded.append(f"{path} (maxProperties)")
    assert unbounded == []


@pytest.mark.parametrize("kind", KINDS)
def test_strings_with_cel_declare_max_length(kind):
    # Every CEL'd string, transition rules (`self == oldSelf`) included: comparing two unbounded strings
    # is priced at the request-size limit.
    unbounded = [path for path, node in nodes(schema_of(kind))
                 if node.get("type") == "string" and node.get("x-kubernetes-validations") and "maxLength" not in node]
    assert unbounded == []
    transition_strings = [path for path, node in nodes(schema_of(kind)) if node.get("type") == "string"
                          and any(is_transition(r) for r in node.get("x-kubernetes-validations", []))]
    if kind == "TrainJob":  # the guard really sees them
        assert ".spec.managedBy" in transition_strings
        assert any(p.endswith("[].template.spec.template.spec.serviceAccountName") for p in transition_strings)


@pytest.mark.parametrize("kind", KINDS)
def test_unbounded_exceptions_are_still_real(kind):
    """An allow-listed path that disappears or gains a bound should leave the allow-list."""
    paths = {path: node for path, node in nodes(schema_of(kind))}
    for path in UPSTREAM_UNBOUNDED_LISTS:
        if kind == "TrainJob":
            assert path not in paths
        else:
            assert "maxItems" not in paths[path] and has_cel(paths[path])


PATCH_POD = ".spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec.template.spec"
JOBSET = ".spec.template.spec"

# (kind, path, keyword, upstream value). TrainJob: kubeflow/trainer v2.3 trainjob_types.go markers;
# runtimes: jobset v0.12 jobset.x-k8s.io_jobsets.yaml.
UPSTREAM_BOUNDS = [
    ("TrainJob", ".spec.runtimePatches", "maxItems", 16),
    ("TrainJob", ".spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs", "maxItems", 100),
    ("TrainJob", ".spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[].name", "maxLength", 253),
    ("TrainJob", f"{PATCH_POD}.serviceAccountName", "maxLength", 253),
    ("TrainJob", f"{PATCH_POD}.volumes", "maxItems", 128),
    ("TrainJob", f"{PATCH_POD}.containers", "maxItems", 64),
    ("TrainJob", f"{PATCH_POD}.initContainers", "maxItems", 64),
    ("TrainJob", f"{PATCH_POD}.containers[].name", "maxLength", 253),
    ("TrainJob", f"{PATCH_POD}.containers[].volumeMounts", "maxItems", 128),
    ("TrainJob", f"{PATCH_POD}.initContainers[].volumeMounts", "maxItems", 128),
    ("TrainJob", f"{PATCH_POD}.imagePullSecrets", "maxItems", 64),
    ("TrainJob", f"{PATCH_POD}.schedulingGates", "maxItems", 16),
    ("TrainJob", f"{PATCH_POD}.tolerations", "maxItems", 128),
    ("TrainJob", ".status.jobsStatus[].name", "maxLength", 253),
    ("ClusterTrainingRuntime", f"{JOBSET}.volumeClaimPolicies", "maxItems", 50),
    ("ClusterTrainingRuntime", f"{JOBSET}.volumeClaimPolicies[].templates", "maxItems", 50),
    ("ClusterTrainingRuntime", f"{JOBSET}.replicatedJobs[].dependsOn", "maxItems", 5),
    ("TrainingRuntime", f"{JOBSET}.volumeClaimPolicies", "maxItems", 50),
]


@pytest.mark.parametrize("kind,path,keyword,value", UPSTREAM_BOUNDS)
def test_bounds_match_upstream(kind, path, keyword, value):
    assert dict(nodes(schema_of(kind)))[path][keyword] == value


def test_seed_era_overrides_keep_their_shape():
    """podTemplateOverrides (v2.1) carries no CEL, so it needs (and gets) none of v2.3's patch bounds."""
    spec = dict(nodes(schema_of("TrainJob")))[".spec.podTemplateOverrides[].spec"]
    assert not has_cel(spec)
    assert "maxItems" not in spec["properties"]["imagePullSecrets"]
    assert "maxLength" not in spec["properties"]["serviceAccountName"]


def claim_policy(namespace=None):
    meta = {"name": "data"} if namespace is None else {"name": "data", "namespace": namespace}
    return {"templates": [{"metadata": meta, "spec": {"accessModes": ["ReadWriteOnce"]}}]}


@pytest.mark.parametrize("namespace,ok", [(None, True), ("", True), ("other", False)])
def test_claim_template_namespace_rule_matches_jobset(namespace, ok):
    """JobSet allows an unset or empty namespace; the CEL text and the Python predicate agree on it."""
    schema = api.jobset_spec()["properties"]["volumeClaimPolicies"]
    errors = validate(schema, [claim_policy(namespace)], "spec.volumeClaimPolicies")
    assert (errors == []) is ok
    if not ok:
        assert errors[0].message == "namespace cannot be set for VolumeClaimPolicies templates"
    rule = schema["items"]["x-kubernetes-validations"][0].rule
    assert "size(t.metadata.namespace) == 0" in rule


def test_admission_enforces_the_new_bounds():
    schema = api.jobset_spec()["properties"]["volumeClaimPolicies"]
    errors = validate(schema, [claim_policy()] * 51, "spec.volumeClaimPolicies")
    assert [e.kind for e in errors] == ["Too many"]
    pod = api.pod_spec_patch(True)
    errors = validate(pod, {"serviceAccountName": "s" * 254, "imagePullSecrets": [{"name": f"p{i}"} for i in range(65)]}, "spec")
    assert sorted(e.kind for e in errors) == ["Too long", "Too many"]
