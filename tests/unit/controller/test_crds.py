"""CRDs generated from trainyard's models."""

import json

import pytest

from trainyard.controller.crds import crd_objects


def crd(kind):
    return next(c for c in crd_objects() if c["spec"]["names"]["kind"] == kind)


def props(schema, *path):
    for name in path:
        schema = schema["items"] if name == "[]" else schema["properties"][name]
    return schema


def rules(schema):
    return {r["message"]: r["rule"] for r in schema.get("x-kubernetes-validations", [])}


@pytest.mark.parametrize("kind,plural,scope,status", [
    ("TrainJob", "trainjobs", "Namespaced", True), ("TrainingRuntime", "trainingruntimes", "Namespaced", False),
    ("ClusterTrainingRuntime", "clustertrainingruntimes", "Cluster", False)])
def test_crd_identity_versions_and_subresources(kind, plural, scope, status):
    c = crd(kind)
    assert c["metadata"]["name"] == f"{plural}.trainer.kubeflow.org" and c["spec"]["scope"] == scope
    assert c["spec"]["conversion"] == {"strategy": "None"}
    assert [(v["name"], v["served"], v["storage"]) for v in c["spec"]["versions"]] == [("v1alpha1", True, True), ("v2alpha1", True, False)]
    assert all(("subresources" in v) is status for v in c["spec"]["versions"])
    v1, v2 = c["spec"]["versions"]
    assert v1["schema"] == v2["schema"]
    json.dumps(c)  # plain JSON, no Python objects left


def test_trainjob_printer_columns_and_defaults():
    v = crd("TrainJob")["spec"]["versions"][0]
    assert v["additionalPrinterColumns"][0] == {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"}
    assert v["additionalPrinterColumns"][1]["name"] == "Age"
    spec = props(v["schema"]["openAPIV3Schema"], "spec")
    assert props(spec, "runtimeRef", "apiGroup")["default"] == "trainer.kubeflow.org"
    assert props(spec, "runtimeRef", "kind")["default"] == "ClusterTrainingRuntime"
    assert props(spec, "suspend")["default"] is False
    assert props(spec, "managedBy")["default"] == "trainer.kubeflow.org/trainjob-controller"
    assert "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set" in rules(props(spec, "managedBy"))
    assert rules(props(spec, "runtimeRef")) == {"field is immutable": "self == oldSelf"}
    assert props(spec, "trainer", "numProcPerNode")["x-kubernetes-int-or-string"] is True
    for seed_field in ("labels", "annotations", "podTemplateOverrides"):
        assert seed_field in spec["properties"]
    assert set(props(spec, "podTemplateOverrides", "[]", "spec")["properties"]) >= {
        "serviceAccountName", "nodeSelector", "affinity", "tolerations", "volumes", "initContainers", "containers",
        "schedulingGates", "imagePullSecrets"}
    status = props(v["schema"]["openAPIV3Schema"], "status")
    assert {"conditions", "jobsStatus"} <= set(status["properties"])
    root = rules(v["schema"]["openAPIV3Schema"])
    assert "metadata.name must match RFC 1035 DNS label format" in root


def test_runtime_schema_policies():
    spec = props(crd("ClusterTrainingRuntime")["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "spec")
    ml = props(spec, "mlPolicy")
    assert "Only one of the policy can be configured" in rules(ml)
    assert props(ml, "mpi", "mpiImplementation")["enum"] == ["OpenMPI", "Intel", "MPICH", ""]
    assert props(ml, "mpi", "sshAuthMountPath")["default"] == "/root/.ssh"
    assert set(props(ml, "torch", "elasticPolicy")["properties"]) == {"maxRestarts", "minNodes", "maxNodes", "metrics"}
    assert props(spec, "podGroupPolicy", "coscheduling", "scheduleTimeoutSeconds")["default"] == 60
    assert props(spec, "podGroupPolicy", "volcano", "networkTopology", "mode")["enum"] == ["hard", "soft"]
    jobset = props(spec, "template", "spec")
    assert "StartupPolicy and DependsOn APIs are mutually exclusive" in rules(jobset)
    assert props(jobset, "replicatedJobs", "[]", "replicas")["default"] == 1
    assert props(jobset, "replicatedJobs", "[]", "groupName")["default"] == "default"
