"""Admission: upstream rules and messages, seed-era rules, beyond-upstream warnings, AdmissionReview."""

import pytest

from trainyard.controller.admission import (admission_review_response, default_trainjob_patch, validate_runtime,
                                            validate_trainjob)

from ctl_builders import job, runtime, trainjob

DEPRECATED = ('ClusterTrainingRuntime "rt" is deprecated and will be removed in a future release of Kubeflow Trainer. '
              "See runtime deprecation policy: https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy")


def messages(result):
    return [str(e) for e in result.errors]


def test_valid_runtime_and_trainjob_pass():
    assert validate_runtime(runtime(ml={"torch": {}})).allowed
    result = validate_trainjob(trainjob(trainer={"numNodes": 2}), runtime(ml={"torch": {}}))
    assert result.allowed and result.warnings == []


@pytest.mark.parametrize("rt,expected", [
    (runtime(jobs=[dict(job("node", "trainer"), replicas=2)]),
     "spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1"),
    (runtime(jobs=[job("node", "trainer", [{"name": "main"}])]),
     "must contain the required container for the ancestor: trainer"),
    (runtime(jobs=[job("d", "dataset-initializer", [{"name": "x"}]), job("node", "trainer")]),
     "must contain the required container for the ancestor: dataset-initializer"),
    (runtime(ml={"torch": {}, "mpi": {}}), "Only one of the policy can be configured"),
    (runtime(ml={"numNodes": 2, "torch": {"elasticPolicy": {"maxNodes": 3}}}), "numNodes should not be set if torch.elasticPolicy is configured"),
    (runtime(ml={"mpi": {"numProcPerNode": 0}}), "NumProcPerNode in mpiPolicy must be >= 1"),
    (runtime(ml={"mpi": {"mpiImplementation": "LAM"}}), 'Unsupported value: "LAM"'),
    (runtime(ml={"torch": {"numProcPerNode": "many"}}), "numProcPerNode must be greater than or equal to 1, or one of auto, cpu, gpu"),
    (runtime(ml={"torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["node"]}]}}}),
     "containerNames must not include the main node container because PET_* envs are always injected into it"),
    (runtime(startupPolicy={"startupPolicyOrder": "InOrder"}, jobs=[job("a"), dict(job("node", "trainer"), dependsOn=[{"name": "a", "status": "Complete"}])]),
     "StartupPolicy and DependsOn APIs are mutually exclusive"),
])
def test_runtime_errors(rt, expected):
    assert any(expected in m for m in messages(validate_runtime(rt)))


def test_training_runtime_webhook_only_on_create_and_disabled_label():
    bad = runtime(jobs=[dict(job("node", "trainer"), replicas=2)], kind="TrainingRuntime")
    assert not validate_runtime(bad).allowed
    assert validate_runtime(bad, old=bad).allowed
    disabled = runtime(jobs=[dict(job("node", "trainer"), replicas=2)], labels={"trainer.kubeflow.org/webhook-validation": "disabled"})
    assert validate_runtime(disabled).allowed


def test_deprecation_warnings():
    rt = runtime(labels={"trainer.kubeflow.org/support": "deprecated"})
    assert validate_runtime(rt).warnings == [DEPRECATED]
    assert validate_runtime(rt, old=rt).warnings == []
    assert validate_trainjob(trainjob(), rt).warnings == ["Referenced " + DEPRECATED]


@pytest.mark.parametrize("rt,fix", [
    (runtime(jobs=[{"name": "node", "template": {"spec": {"template": {"metadata": {"labels": {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}, "spec": {"containers": [{"name": "node"}]}}}}}]),
     "add it under spec.template.spec.replicatedJobs[0].template.metadata.labels"),
    (runtime(jobs=[job("node", "trainer", [{"name": "trainer"}])], **{}), 'rename the training container to "node"'),
])
def test_beyond_upstream_trainer_job_warnings(rt, fix):
    result = validate_runtime(rt, old=rt)  # update: upstream webhook errors skipped, warning stays
    assert any(fix in w for w in result.warnings)
    assert any("spec.trainer is ignored" in w for w in validate_trainjob(trainjob(trainer={"image": "x"}), rt).warnings)


@pytest.mark.parametrize("tj,rt,expected", [
    (trainjob(), None, 'spec.RuntimeRef: Invalid value: "rt": clustertrainingruntimes.trainer.kubeflow.org "rt" not found: specified clusterTrainingRuntime must be created before the TrainJob is created'),
    (trainjob(kind="TrainingRuntime"), None, "specified trainingRuntime must be created before the TrainJob is created"),
    (trainjob(kind="Nope"), runtime(), "unsupported runtime: Nope.trainer.kubeflow.org"),
    (trainjob(name="Bad_Name"), runtime(), "metadata.name must match RFC 1035 DNS label format"),
    (trainjob(initializer={"dataset": {"storageUri": "no-scheme"}}), runtime(), "storageUri may be empty, or it must be a valid URI (scheme://...)"),
    (trainjob(initializer={"dataset": {"storageUri": "hf://x"}}), runtime(), "must have dataset-initializer job when trainJob is configured with input datasetConfig"),
    (trainjob(initializer={"model": {}}), runtime(jobs=[job("m", "model-initializer", [{"name": "model-initializer"}]), job("node", "trainer")]),
     "must have volumeMount with name - initializer in container model-initializer of the model-initializer job"),
    (trainjob(managedBy="me"), runtime(), "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set"),
    (trainjob(trainer={"numNodes": -1}), runtime(), "spec.trainer.numNodes in body should be greater than or equal to 0"),
    (trainjob(trainer={"numProcPerNode": 0}), runtime(), "numProcPerNode must be greater than or equal to 1"),
    # a quoted digit is a string, refused by the CRD's CEL rule; Python admission agrees
    (trainjob(trainer={"numProcPerNode": "4"}), runtime(), "numProcPerNode must be greater than or equal to 1, or one of auto, cpu, gpu"),
    (trainjob(trainer={"env": [{"name": "PET_NNODES", "value": "1"}]}), runtime(ml={"torch": {}}),
     "must not have reserved envs, invalid envs configured: [PET_NNODES]"),
    (trainjob(trainer={"env": [{"name": "OMPI_MCA_plm_rsh_args", "value": "1"}]}), runtime(ml={"mpi": {}}), "must not have reserved envs"),
    (trainjob(trainer={"env": [{"name": "PRTE_MCA_prte_default_hostfile", "value": "1"}]}), runtime(ml={"mpi": {}}),
     "must not have reserved envs"),                                           # v2.4, kubeflow/trainer#4029
    (trainjob(trainer={"env": [{"name": "DMLC_TASK_ID", "value": "1"}]}), runtime(ml={"xgboost": {}}),
     "spec.trainer.env[0]: Forbidden: DMLC_TASK_ID is reserved for the XGBoost runtime"),
    (trainjob(trainer={"numNodes": 2}), runtime(ml={"mpi": {"runLauncherAsNode": True}}),
     "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node"),
    (trainjob(runtimePatches=[{"manager": "nodomain"}]), runtime(), "must be a domain-prefixed path"),
    (trainjob(runtimePatches=[{"manager": "x.io/m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "ghost"}]}}}}]),
     runtime(), "must not have replicated job that doesn't exist in the runtime job template"),
    (trainjob(runtimePatches=[{"manager": "x.io/m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
        "containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]}}}}}]}}}}]),
     runtime(), "must not have envs for the dataset-initializer, model-initializer, node containers"),
    (trainjob(podTemplateOverrides=[{"targetJobs": [{"name": "ghost"}]}]), runtime(), "must not have targetJob that doesn't exist in the runtime job template"),
    (trainjob(podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "spec": {"initContainers": [{"name": "x"}]}}]), runtime(),
     "must not have initContainer that doesn't exist in the runtime job node"),
    (trainjob(trainer={"numNodes": 9}), runtime(ml={"torch": {"elasticPolicy": {"minNodes": 1, "maxNodes": 4}}}), "outside the elastic range"),
    (trainjob(), runtime(ml={"torch": {"elasticPolicy": {"metrics": [{"type": "Resource"}]}}}), "autoscaling on metrics is not supported"),
])
def test_trainjob_errors(tj, rt, expected):
    assert any(expected in m for m in messages(validate_trainjob(tj, rt))), messages(validate_trainjob(tj, rt))


def volcano_rt(**annotations):
    return runtime(pod_group={"volcano": {}}, jobs=[job("node", "trainer", priorityClassName="high")], annotations=annotations or None)


@pytest.mark.parametrize("tj,cluster,expected", [
    (trainjob(annotations={"scheduling.volcano.sh/queue-name": ""}), [], "Volcano queue name must not be empty"),
    (trainjob(annotations={"scheduling.volcano.sh/queue-name": "q"}), [{"kind": "PriorityClass", "metadata": {"name": "high"}}],
     "Volcano queue 'q' doesn't exist"),
    (trainjob(), [], 'spec.templateSpec.priorityClassName: Invalid value: "high": PriorityClass "high" doesn\'t exist'),
    (trainjob(annotations={"scheduling.volcano.sh/queue-name": "q"}),
     [{"kind": "PriorityClass", "metadata": {"name": "high"}}, {"kind": "Queue", "metadata": {"name": "q"}}], None),
])
def test_volcano_queue_and_priority_class(tj, cluster, expected):
    result = validate_trainjob(tj, volcano_rt(), cluster_objects=cluster)
    if expected is None:
        assert result.allowed, messages(result)
    else:
        assert any(expected in m for m in messages(result)), messages(result)


def test_update_rules():
    patch = [{"manager": "x.io/m", "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"a": "b"}}}}}]
    old = trainjob()
    result = validate_trainjob(trainjob(runtimePatches=patch), runtime(), old=old)
    assert "RuntimePatches can only be modified when the TrainJob is suspended before or after the update" in messages(result)[0]
    active = {"kind": "JobSet", "metadata": {"name": "tj", "namespace": "ns"}, "status": {"replicatedJobsStatus": [{"name": "node", "active": 1}]}}
    result = validate_trainjob(trainjob(runtimePatches=patch, suspend=True), runtime(), old=old, cluster_objects=[active])
    assert "RuntimePatches cannot be modified when the JobSet's ReplicatedJob node is still active" in messages(result)[0]
    changed = trainjob(trainer={"numNodes": 3})
    assert any("spec.trainer: Invalid value" in m and "field is immutable" in m
               for m in messages(validate_trainjob(changed, runtime(), old=trainjob(trainer={"numNodes": 2}))))


def test_bad_types_are_errors_not_crashes():
    result = validate_trainjob(trainjob(trainer={"numNodes": "two"}), runtime())
    assert messages(result) == ["spec.trainer.numNodes: Invalid: must be of type integer, got string; fix the value of this field"]


def test_admission_review_response():
    def lookup(kind, name, namespace):
        return runtime(ml={"torch": {}}) if (kind, name) == ("ClusterTrainingRuntime", "rt") else None

    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u", "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
                          "operation": "CREATE", "object": trainjob()}}
    assert admission_review_response(review, lookup) == {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "u", "allowed": True}}
    review["request"]["object"] = trainjob(trainer={"env": [{"name": "PET_NNODES", "value": "1"}]})
    response = admission_review_response(review, lookup)["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert "must not have reserved envs" in response["status"]["message"]
    review["request"]["object"] = trainjob(runtime_name="missing")
    assert "not found" in admission_review_response(review, lookup)["response"]["status"]["message"]


def test_admission_review_runtime_warning():
    rt = runtime(labels={"trainer.kubeflow.org/support": "deprecated"})
    review = {"request": {"uid": "u", "kind": {"kind": "ClusterTrainingRuntime"}, "operation": "CREATE", "object": rt}}
    assert admission_review_response(review, lambda *a: None)["response"]["warnings"] == [DEPRECATED]


def test_defaulter_stamps_runtime_patch_time():
    patch = {"manager": "x.io/m", "trainingRuntimeSpec": {}}
    new = trainjob(runtimePatches=[patch])
    assert default_trainjob_patch(new, None, "T1") == [{"op": "add", "path": "/spec/runtimePatches/0/time", "value": "T1"}]
    old = trainjob(runtimePatches=[dict(patch, time="T0")])
    assert default_trainjob_patch(new, old, "T1") == [{"op": "add", "path": "/spec/runtimePatches/0/time", "value": "T0"}]
