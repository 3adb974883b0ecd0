"""`spec.trainer.resourceClaimsPerNode` (KEP-2782): the schema, the build, the GPUs per node it gives, and what
admission and the quota check make of it."""

from __future__ import annotations

import pytest

from trainyard.controller import dra, failures
from trainyard.controller.admission import admission_review_response
from trainyard.controller.build import build_objects
from trainyard.controller.errors import BuildError, ValidationError
from trainyard.controller.trainjob_validation import validate_trainjob

from ctl_builders import container, env_of, job, rjob, runtime, the_jobset, trainjob

NS = "ns"


def template(name: str = "gpus", *requests: dict, namespace: str = NS) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": list(requests)}}}}


def exactly(device_class: str = "gpu.nvidia.com", count: int | None = 8, mode: str | None = None, name: str = "r") -> dict:
    request = {"deviceClassName": device_class, **({"count": count} if count is not None else {}),
               **({"allocationMode": mode} if mode else {})}
    return {"name": name, "exactly": request}


def first_available(*alternatives: dict, name: str = "r") -> dict:
    return {"name": name, "firstAvailable": [{"name": f"a{i}", **a} for i, a in enumerate(alternatives)]}


@pytest.mark.parametrize("requests, devices, gpus", [
    ([exactly(count=8)], {"gpu.nvidia.com": 8}, 8),
    ([exactly(count=None)], {"gpu.nvidia.com": 1}, 1),                               # ExactCount defaults to 1
    ([exactly(count=4), exactly("gpu.nvidia.com", 2, name="s")], {"gpu.nvidia.com": 6}, 6),
    ([exactly(count=4), exactly("rdma.example.com", 1, name="nic")], {"gpu.nvidia.com": 4, "rdma.example.com": 1}, 4),
    ([exactly(mode="All", count=None)], {"gpu.nvidia.com": None}, None),             # no count until allocated
    ([exactly("nic.example.com", mode="All", count=None)], {"nic.example.com": None}, 0),  # not GPUs: no count needed
    ([first_available({"deviceClassName": "gpu.nvidia.com", "count": 8},
                      {"deviceClassName": "gpu.nvidia.com", "count": 4})], {"gpu.nvidia.com": 8}, 8),  # the largest
    ([], {}, 0),
])
def test_a_templates_devices_and_gpus(requests, devices, gpus):
    tmpl = template("t", *requests)
    assert dra.template_devices(tmpl) == devices
    assert dra.gpu_devices(tmpl) == gpus


CLAIMS = [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]


def torch_runtime(**pod):
    return runtime([job("node", "trainer", [{"name": "node", "image": "img"}], **pod)], ml={"torch": {}})


def dra_trainjob(claims=CLAIMS, **trainer):
    return trainjob(trainer={"numNodes": 2, "resourceClaimsPerNode": claims, **trainer})


def test_the_claims_go_to_the_trainer_pods_and_their_node_container():
    objects = build_objects(dra_trainjob(), torch_runtime(), [template("eight-gpus", exactly(count=8))])
    jobset = the_jobset(objects)
    pod = rjob(jobset, "node")["template"]["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]
    assert container(jobset, "node")["resources"]["claims"] == [{"name": "gpus"}]
    # numProcPerNode auto: the claimed GPUs are GPUs (torchrun counts them), not a fall-back to the CPUs
    assert ("PET_NPROC_PER_NODE", "auto") in env_of(container(jobset, "node"))


def test_without_claims_auto_falls_back_to_the_cpus_as_upstream():
    objects = build_objects(trainjob(trainer={"numNodes": 1, "resourcesPerNode": {"limits": {"cpu": "3"}}}),
                            torch_runtime(), [])
    assert ("PET_NPROC_PER_NODE", "3") in env_of(container(the_jobset(objects), "node"))


@pytest.mark.parametrize("objects, message", [
    ([], "ResourceClaimTemplate 'eight-gpus' not found in namespace ns"),
    ([template("eight-gpus", namespace="other")], "not found in namespace ns"),
    ([template("eight-gpus", exactly(mode="All", count=None))], "asks for All devices of a GPU class"),
])
def test_a_build_that_cannot_count_the_claimed_gpus_names_the_entry(objects, message):
    with pytest.raises(BuildError) as caught:
        build_objects(dra_trainjob(), torch_runtime(), objects)
    assert caught.value.field == "spec.trainer.resourceClaimsPerNode[0].resourceClaimTemplateName"
    assert message in caught.value.message


def test_a_claim_name_the_runtime_pod_already_uses_is_refused():
    rt = torch_runtime(resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": "x"}])
    with pytest.raises(ValidationError) as caught:
        build_objects(dra_trainjob(), rt, [template("eight-gpus", exactly())])
    assert caught.value.field == "spec.trainer.resourceClaimsPerNode[0].name"


@pytest.mark.parametrize("trainer, expected", [
    ({"resourceClaimsPerNode": CLAIMS}, None),
    ({"resourcesPerNode": {"claims": [{"name": "gpus"}]}}, "request devices with resourceClaimsPerNode"),
    ({"resourceClaimsPerNode": [{"name": "Bad_Name", "resourceClaimTemplateName": "t"}]}, "should match"),
    ({"resourceClaimsPerNode": [{"name": "gpus"}]}, "resourceClaimTemplateName"),
    ({"resourceClaimsPerNode": [{"name": f"c{i}", "resourceClaimTemplateName": "t"} for i in range(33)]},
     "at most 32 items"),
    ({"resourceClaimsPerNode": CLAIMS * 2}, "Duplicate"),
])
def test_the_schema_of_resource_claims_per_node(trainer, expected):
    result = validate_trainjob(trainjob(trainer={"numNodes": 1, **trainer}), torch_runtime(),
                               cluster_objects=[template("t", exactly()), template("eight-gpus", exactly())])
    text = " ".join(str(e) for e in result.errors)
    if expected is None:
        assert result.allowed, text
    else:
        assert not result.allowed and expected in text, text


def gpu_quota(*device_classes: str, gpus: str = "16") -> dict:
    hard = {"requests.nvidia.com/gpu": gpus, **{f"{c}.deviceclass.resource.k8s.io/devices": gpus for c in device_classes}}
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tenant-quota", "namespace": NS},
            "spec": {"hard": hard}}


@pytest.mark.parametrize("templates, quotas, expected", [
    ([template("eight-gpus", exactly())], [gpu_quota("gpu.nvidia.com")], None),
    ([template("eight-gpus", exactly())], [], None),                        # no GPU quota: not a tenant's cap to guard
    ([template("eight-gpus", exactly("gpu.other.com"))], [gpu_quota("gpu.nvidia.com")],
     "DeviceClass 'gpu.other.com', which no ResourceQuota of namespace ns caps"),
    ([template("eight-gpus", exactly("nic.example.com", 1))], [gpu_quota("gpu.nvidia.com")], None),  # not GPUs
    ([], [gpu_quota("gpu.nvidia.com")], "not found in namespace ns"),
])
def test_admission_refuses_claims_that_could_never_be_met_or_would_go_around_the_gpu_quota(templates, quotas, expected):
    errors = dra.admission_errors(dra_trainjob(), templates, quotas)
    if expected is None:
        assert errors == []
    else:
        (error,) = errors
        assert error.field == "spec.trainer.resourceClaimsPerNode[0].resourceClaimTemplateName"
        assert expected in error.message


def review(obj: dict) -> dict:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
                        "operation": "CREATE", "object": obj}}


@pytest.mark.parametrize("nodes, gpus_per_claim, allowed", [(2, 8, True), (3, 8, False), (1, 16, True), (2, 9, False)])
def test_the_webhook_counts_claimed_gpus_against_the_quota_of_their_class(nodes, gpus_per_claim, allowed):
    objects = {("ClusterTrainingRuntime", "rt"): torch_runtime(),
               ("ResourceClaimTemplate", "eight-gpus"): template("eight-gpus", exactly(count=gpus_per_claim))}

    def lookup(kind, name, namespace=None):
        if kind == "ResourceQuota":
            return [gpu_quota("gpu.nvidia.com")]
        return objects.get((kind, name))

    created = trainjob(trainer={"numNodes": nodes, "resourceClaimsPerNode": CLAIMS})
    response = admission_review_response(review(created), lookup)["response"]
    assert response["allowed"] is allowed, response
    if not allowed:
        assert "gpu.nvidia.com.deviceclass.resource.k8s.io/devices" in response["status"]["message"]
        assert f"needs {nodes * gpus_per_claim}" in response["status"]["message"]


def test_the_quota_check_counts_a_jobsets_claimed_devices():
    objects = build_objects(dra_trainjob(), torch_runtime(), [template("eight-gpus", exactly(count=8))])
    jobset = the_jobset(objects)
    templates = [template("eight-gpus", exactly(count=8))]
    assert failures.quota_failure(jobset, [gpu_quota("gpu.nvidia.com", gpus="16")], templates) is None
    failure = failures.quota_failure(jobset, [gpu_quota("gpu.nvidia.com", gpus="8")], templates)
    assert failure is not None and "gpu.nvidia.com.deviceclass.resource.k8s.io/devices=16" in failure.message
    assert failures.quota_failure(jobset, [gpu_quota("gpu.nvidia.com", gpus="8")]) is None  # no template, no count


def test_offline_validation_without_the_template_names_the_entry_and_the_fix():
    result = validate_trainjob(dra_trainjob(), torch_runtime())
    (error,) = result.errors
    assert error.field == "spec.trainer.resourceClaimsPerNode[0].resourceClaimTemplateName"
    assert "create it (resource.k8s.io/v1) before the TrainJob" in error.message
