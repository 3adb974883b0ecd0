"""build_objects: one row per behaviour (upstream semantics, seed-era fields, beyond-upstream)."""

import base64
import copy

import pytest
import yaml

from trainyard.controller.build import build_objects, may_apply_jobset
from trainyard.controller.errors import BuildError, ValidationError

from ctl_builders import by_kind, container, env_of, fixed_key, job, rjob, runtime, the_jobset, trainjob

NODE_RANK = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def build(tj, rt, existing=()):
    return build_objects(tj, rt, existing, key_generator=fixed_key)


def test_object_order_and_owner_references():
    rt = runtime(ml={"mpi": {}}, pod_group={"volcano": {}}, jobs=[job("launcher", "trainer"), job("node")])
    objects = build(trainjob(), rt)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ConfigMap", "tj-runtime-snapshot"), ("Secret", "tj-mpi-ssh-auth"), ("ConfigMap", "tj-mpi-hostfile"),
        ("PodGroup", "tj"), ("JobSet", "tj")]
    for obj in objects:
        assert obj["metadata"]["namespace"] == "ns"
        assert obj["metadata"]["ownerReferences"] == [{
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj", "uid": "uid-1",
            "controller": True, "blockOwnerDeletion": True}]


def test_deterministic():
    rt = runtime(ml={"torch": {}}, pod_group={"coscheduling": {}})
    assert build(trainjob(trainer={"numNodes": 3}), rt) == build(trainjob(trainer={"numNodes": 3}), rt)


def test_snapshot_holds_runtime_yaml_and_later_builds_use_it():
    rt = runtime(ml={"torch": {}})
    snapshot = build(trainjob(), rt)[0]
    stored = yaml.safe_load(snapshot["data"]["runtime"])
    assert stored["kind"] == "ClusterTrainingRuntime" and stored["metadata"]["name"] == "rt"
    edited = copy.deepcopy(rt)
    container_ = edited["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container_["image"] = "edited"
    objects = build(trainjob(), edited, existing=[snapshot])
    assert by_kind(objects, "ConfigMap") == []  # snapshot exists: not re-applied
    assert container(the_jobset(objects), "node")["image"] == "img"  # built from the snapshot
    assert container(the_jobset(build(trainjob(), edited)), "node")["image"] == "edited"


@pytest.mark.parametrize("runtime_name", ["torchtune-llama3.2-1b", "mpich-distributed", "torch-distributed-topology"])
def test_the_snapshot_text_is_what_pyyaml_itself_writes(runtime_name):
    """libyaml writes the snapshot (speed); its text must stay PyYAML's, byte for byte (the seal covers it)."""
    from trainyard.runtimes.publish import cluster_runtimes_of
    from trainyard.runtimes.store import load_catalog

    (rt,) = cluster_runtimes_of(load_catalog(), "1.2.0", runtime_name)
    rt["metadata"]["annotations"] = {"note": "ünïcode, quotes ' \" and a: colon", "long": "x " * 120}
    text = build(trainjob(runtime_name=runtime_name), rt)[0]["data"]["runtime"]
    assert "note:" in text and "long:" in text
    assert text == yaml.dump(yaml.safe_load(text), Dumper=yaml.SafeDumper, sort_keys=True)


def test_snapshot_of_another_trainjob_is_rejected():
    snapshot = build(trainjob(), runtime())[0]
    snapshot["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    with pytest.raises(BuildError, match="invalid runtime snapshot"):
        build(trainjob(), runtime(), existing=[snapshot])


def test_runtime_missing_without_snapshot():
    with pytest.raises(BuildError, match="not found ClusterTrainingRuntime specified in TrainJob"):
        build(trainjob(), None)


def test_unsupported_runtime_kind():
    tj = trainjob()
    tj["spec"]["runtimeRef"]["kind"] = "Other"
    with pytest.raises(BuildError, match="unsupported runtime: Other.trainer.kubeflow.org"):
        build(tj, runtime())


@pytest.mark.parametrize("status,managed_by", [
    ({"conditions": [{"type": "Complete", "status": "True"}]}, None),
    ({"conditions": [{"type": "Failed", "status": "True"}]}, None),
    (None, "kueue.x-k8s.io/multikueue"),
])
def test_nothing_applied_when_finished_or_managed_elsewhere(status, managed_by):
    tj = trainjob()
    if status:
        tj["status"] = status
    if managed_by:
        tj["spec"]["managedBy"] = managed_by
    assert build(tj, runtime()) == []


def test_jobset_is_complete_with_webhook_defaults():
    js = the_jobset(build(trainjob(), runtime()))
    spec = js["spec"]
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}  # no subdomain: upstream's
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["suspend"] is False and "failurePolicy" not in spec
    node = rjob(js, "node")
    assert node["replicas"] == 1 and node["groupName"] == "default"
    job_spec = node["template"]["spec"]
    assert (job_spec["completionMode"], job_spec["parallelism"], job_spec["completions"]) == ("Indexed", 1, 1)
    assert "backoffLimit" not in job_spec, "batch/v1 defaults it when the Job is created, not in the JobSet"
    assert job_spec["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert js["apiVersion"] == "jobset.x-k8s.io/v1alpha2"


def test_runtime_values_are_kept_over_defaults():
    rt = runtime(network={"publishNotReadyAddresses": False, "subdomain": "sub"}, failurePolicy={"maxRestarts": 2},
                 jobs=[job("node", "trainer", restartPolicy="Never")])
    spec = the_jobset(build(trainjob(), rt))["spec"]
    assert spec["network"] == {"publishNotReadyAddresses": False, "subdomain": "sub", "enableDNSHostnames": True}
    assert spec["failurePolicy"] == {"maxRestarts": 2, "restartStrategy": "Recreate"}
    assert rjob({"spec": spec}, "node")["template"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"


# ---- torch ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("trainer_nproc,runtime_nproc,resources,expected", [
    (None, None, {"requests": {"cpu": "3"}}, "3"),                 # auto, no GPU -> CPU count
    (None, None, {"requests": {"cpu": "1500m"}}, "2"),             # rounded up
    (None, None, {"limits": {"cpu": "4"}}, "4"),                   # request absent -> limit
    (None, None, {}, "1"),                                         # at least 1
    (None, None, {"limits": {"nvidia.com/gpu": 2}}, "auto"),       # auto with GPU stays literal
    (None, "cpu", {"requests": {"cpu": "6", "nvidia.com/gpu": 2}}, "6"),  # v2.1 "cpu"
    (None, "gpu", {"requests": {"nvidia.com/gpu": 2}}, "gpu"),     # v2.1 "gpu" passes through
    (None, 5, {}, "5"),                                            # seed-era mlPolicy.torch.numProcPerNode
    (3, 5, {}, "3"),                                               # trainer wins over runtime
    ("auto", 5, {"requests": {"cpu": "2"}}, "2"),                  # trainer "auto" wins over runtime int
])
def test_torch_num_proc_per_node(trainer_nproc, runtime_nproc, resources, expected):
    torch = {} if runtime_nproc is None else {"numProcPerNode": runtime_nproc}
    rt = runtime(ml={"torch": torch}, jobs=[job("node", "trainer", [{"name": "node", "image": "i", "resources": resources}])])
    trainer = {} if trainer_nproc is None else {"numProcPerNode": trainer_nproc}
    node = container(the_jobset(build(trainjob(trainer=trainer), rt)), "node")
    assert dict(env_of(node))["PET_NPROC_PER_NODE"] == expected


def test_torch_resources_per_node_replaces_runtime_for_nproc():
    rt = runtime(ml={"torch": {}}, jobs=[job("node", "trainer", [{"name": "node", "resources": {"requests": {"cpu": "8"}}}])])
    tj = trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "2"}}})
    assert dict(env_of(container(the_jobset(build(tj, rt)), "node")))["PET_NPROC_PER_NODE"] == "2"


def test_torch_env_order_and_pet_values():
    rt = runtime(ml={"torch": {}}, jobs=[job("node", "trainer", [{"name": "node", "env": [{"name": "R", "value": "r"}]}])])
    tj = trainjob(trainer={"numNodes": 3, "env": [{"name": "T", "value": "t"}, {"name": "R", "value": "over"}]})
    node = container(the_jobset(build(tj, rt)), "node")
    assert env_of(node) == [("R", "over"), ("T", "t"), ("PET_NNODES", "3"), ("PET_NPROC_PER_NODE", "1"),
                            ("PET_NODE_RANK", NODE_RANK), ("PET_MASTER_ADDR", "tj-node-0-0.tj"), ("PET_MASTER_PORT", "29500")]
    assert node["ports"] == [{"containerPort": 29500}]
    assert rjob(the_jobset(build(tj, rt)), "node")["template"]["spec"]["parallelism"] == 3


def test_torch_without_spec_trainer_injects_nothing():
    node = container(the_jobset(build(trainjob(), runtime(ml={"torch": {}}))), "node")
    assert "env" not in node and "ports" not in node


def test_torch_env_injection_targets():
    rt = runtime(ml={"torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["check"]}]}}},
                 jobs=[job("node", "trainer", init_containers=[{"name": "check", "image": "c"}])])
    check = container(the_jobset(build(trainjob(), rt)), "node", "check", init=True)
    assert [n for n, _ in env_of(check)] == ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"]


def test_torch_env_injection_missing_container():
    rt = runtime(ml={"torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["nope"]}]}}})
    with pytest.raises(ValidationError, match="envInjection target podSet 'node' container 'nope' not found"):
        build(trainjob(), rt)


@pytest.mark.parametrize("elastic,num_nodes,nnodes,count", [
    ({"minNodes": 2, "maxNodes": 4, "maxRestarts": 3}, None, "2:4", 4),
    ({"minNodes": 2, "maxNodes": 4}, 3, "2:4", 3),
    ({"maxRestarts": 5}, 2, "2", 2),
])
def test_torch_elastic_policy(elastic, num_nodes, nnodes, count):
    rt = runtime(ml={"torch": {"elasticPolicy": elastic}})
    trainer = {"image": "x"} if num_nodes is None else {"numNodes": num_nodes}
    js = the_jobset(build(trainjob(trainer=trainer), rt))
    env = dict(env_of(container(js, "node")))
    assert env["PET_NNODES"] == nnodes
    assert rjob(js, "node")["template"]["spec"]["parallelism"] == count
    if "maxRestarts" in elastic:
        assert env["PET_MAX_RESTARTS"] == str(elastic["maxRestarts"])
        assert js["spec"]["failurePolicy"]["maxRestarts"] == elastic["maxRestarts"]
    if "minNodes" in elastic:
        assert env["PET_RDZV_BACKEND"] == "c10d" and env["PET_RDZV_ENDPOINT"] == "tj-node-0-0.tj:29500"


@pytest.mark.parametrize("elastic,trainer,message", [
    ({"minNodes": 1, "maxNodes": 4, "metrics": [{"type": "Resource"}]}, {}, "autoscaling on metrics is not supported"),
    ({"minNodes": 2, "maxNodes": 4}, {"numNodes": 8}, r"outside the elastic range \[2, 4\]"),
])
def test_torch_elastic_refusals(elastic, trainer, message):
    with pytest.raises(BuildError, match=message):
        build(trainjob(trainer=trainer), runtime(ml={"torch": {"elasticPolicy": elastic}}))


# ---- trainer overrides / initializers -------------------------------------------------------------

def test_trainer_overrides_image_command_args_and_merges_resources():
    rt = runtime(ml={"torch": {}}, jobs=[job("node", "trainer", [{"name": "node", "image": "old", "command": ["a"], "args": ["b"],
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}}])])
    tj = trainjob(trainer={"image": "new", "args": ["--x"], "resourcesPerNode": {"requests": {"cpu": "4"}, "limits": {"nvidia.com/gpu": 1}}})
    node = container(the_jobset(build(tj, rt)), "node")
    assert (node["image"], node["command"], node["args"]) == ("new", ["a"], ["--x"])
    assert node["resources"] == {"requests": {"cpu": "4", "memory": "1Gi"}, "limits": {"memory": "2Gi", "nvidia.com/gpu": 1}}


def test_resources_per_node_ignored_without_ml_policy():
    rt = runtime(jobs=[job("node", "trainer", [{"name": "node", "resources": {"requests": {"cpu": "1"}}}])])
    tj = trainjob(trainer={"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "4"}}})
    js = the_jobset(build(tj, rt))
    assert container(js, "node")["resources"] == {"requests": {"cpu": "1"}}
    assert rjob(js, "node")["template"]["spec"]["parallelism"] == 2  # plainml still honours numNodes


def test_initializers_get_storage_uri_env_and_secret():
    init = [{"name": "dataset-initializer", "env": [{"name": "KEEP", "value": "k"}], "volumeMounts": [{"name": "initializer", "mountPath": "/w"}]}]
    rt = runtime(jobs=[job("dataset-initializer", "dataset-initializer", init), job("node", "trainer")])
    tj = trainjob(initializer={"dataset": {"storageUri": "hf://x", "env": [{"name": "E", "value": "e"}], "secretRef": {"name": "s"}}})
    c = container(the_jobset(build(tj, rt)), "dataset-initializer", "dataset-initializer")
    assert env_of(c) == [("KEEP", "k"), ("STORAGE_URI", "hf://x"), ("E", "e")]
    assert c["envFrom"] == [{"secretRef": {"name": "s"}}]


# ---- runtimePatches / seed-era fields ------------------------------------------------------------

def test_runtime_patches_env_order_and_metadata():
    rt = runtime(jobs=[job("node", "trainer", [{"name": "node", "env": [{"name": "INIT_ENV", "value": "1"}, {"name": "DATASET_PATH", "value": "2"}]},
                                                {"name": "side", "env": []}])], annotations={"a": "runtime"})
    patch = {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {
        "metadata": {"labels": {"l": "p"}, "annotations": {"a": "patched"}},
        "spec": {"replicatedJobs": [{"name": "node", "template": {"metadata": {"labels": {"jl": "x"}}, "spec": {"template": {
            "metadata": {"annotations": {"pa": "y"}},
            "spec": {"nodeSelector": {"n": "1"}, "containers": [{"name": "side", "env": [{"name": "INIT_ENV", "value": "9"}, {"name": "NEW_VALUE", "value": "3"}]}]}}}}}]}}}}
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][1]["env"] = [
        {"name": "INIT_ENV", "value": "1"}, {"name": "DATASET_PATH", "value": "2"}]
    js = the_jobset(build(trainjob(runtimePatches=[patch]), rt))
    assert [n for n, _ in env_of(container(js, "node", "side"))] == ["INIT_ENV", "NEW_VALUE", "DATASET_PATH"]
    assert js["metadata"]["labels"] == {"l": "p"} and js["metadata"]["annotations"] == {"a": "patched"}
    node = rjob(js, "node")
    assert node["template"]["metadata"]["labels"]["jl"] == "x"
    assert node["template"]["spec"]["template"]["metadata"]["annotations"] == {"pa": "y"}
    assert node["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"n": "1"}


def test_runtime_patches_keep_template_job_order():
    rt = runtime(jobs=[job("a"), job("node", "trainer")])
    patch = {"manager": "x.io/m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"metadata": {"labels": {"p": "1"}}}}, {"name": "a", "template": {"metadata": {"labels": {"p": "2"}}}}]}}}}
    js = the_jobset(build(trainjob(runtimePatches=[patch]), rt))
    assert [j["name"] for j in js["spec"]["replicatedJobs"]] == ["a", "node"]


def test_seed_labels_and_annotations_reach_jobset_and_jobs():
    rt = runtime(jobs=[job("node", "trainer"), job("aux")], annotations={"keep": "1", "over": "runtime"})
    js = the_jobset(build(trainjob(labels={"team": "ml"}, annotations={"over": "tj"}), rt))
    assert js["metadata"]["labels"] == {"team": "ml"}
    assert js["metadata"]["annotations"] == {"keep": "1", "over": "tj"}
    for name in ("node", "aux"):
        meta = rjob(js, name)["template"]["metadata"]
        assert meta["labels"]["team"] == "ml" and meta["annotations"]["over"] == "tj"


def test_seed_pod_template_overrides_later_entries_win():
    rt = runtime(jobs=[job("node", "trainer"), job("aux")])
    overrides = [
        {"targetJobs": [{"name": "node"}, {"name": "aux"}], "metadata": {"labels": {"x": "1"}},
         "spec": {"serviceAccountName": "first", "tolerations": [{"key": "a"}], "volumes": [{"name": "v", "emptyDir": {}}]}},
        {"targetJobs": [{"name": "node"}], "spec": {"serviceAccountName": "second", "nodeSelector": {"gpu": "a100"}}},
    ]
    js = the_jobset(build(trainjob(podTemplateOverrides=overrides), rt))
    node_pod = rjob(js, "node")["template"]["spec"]["template"]
    aux_pod = rjob(js, "aux")["template"]["spec"]["template"]
    assert node_pod["spec"]["serviceAccountName"] == "second" and aux_pod["spec"]["serviceAccountName"] == "first"
    assert node_pod["spec"]["nodeSelector"] == {"gpu": "a100"} and "nodeSelector" not in aux_pod["spec"]
    assert node_pod["metadata"]["labels"] == {"x": "1"} and node_pod["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]


def test_seed_label_must_not_override_ancestor():
    with pytest.raises(ValidationError, match="reserved label"):
        build(trainjob(labels={"trainer.kubeflow.org/trainjob-ancestor-step": "x"}), runtime())


# ---- MPI ----------------------------------------------------------------------------------------------

def mpi_runtime(impl=None, launcher_as_node=False, nproc=None, gpus=None):
    mpi = {"runLauncherAsNode": launcher_as_node}
    if impl is not None:
        mpi["mpiImplementation"] = impl
    if nproc is not None:
        mpi["numProcPerNode"] = nproc
    node_res = {"limits": {"nvidia.com/gpu": gpus}} if gpus else {}
    return runtime(ml={"numNodes": 1, "mpi": mpi}, jobs=[
        job("launcher", "trainer", [{"name": "node", "image": "l", "env": [{"name": "R", "value": "r"}]}]),
        job("node", None, [{"name": "node", "image": "w", "resources": node_res}])])


@pytest.mark.parametrize("impl,env_names,line", [
    ("OpenMPI", ["OMPI_MCA_orte_default_hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_orte_set_default_slots", "OMPI_MCA_plm_rsh_args",
                 "PRTE_MCA_prte_default_hostfile", "PRTE_MCA_prte_keep_fqdn_hostnames", "PRTE_MCA_prte_set_default_slots", "PRTE_MCA_plm_ssh_args"],
     "tj-node-0-0.tj slots=1"),
    ("Intel", ["I_MPI_HYDRA_HOST_FILE", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS"], "tj-node-0-0.tj:1"),
    ("MPICH", ["HYDRA_HOST_FILE", "HYDRA_LAUNCH_EXTRA_ARGS"], "tj-node-0-0.tj:1"),
])
def test_mpi_implementations(impl, env_names, line):
    objects = build(trainjob(trainer={"numNodes": 2, "env": [{"name": "T", "value": "t"}]}), mpi_runtime(impl))
    js = the_jobset(objects)
    launcher = container(js, "launcher")
    assert [n for n, _ in env_of(launcher)] == ["R"] + env_names + ["T"]  # plugin env before trainer env
    assert {"name": "mpi-hostfile", "mountPath": "/etc/mpi"} in launcher["volumeMounts"]
    hostfile = by_kind(objects, "ConfigMap")[1]
    assert hostfile["metadata"]["name"] == "tj-mpi-hostfile"
    assert hostfile["data"]["hostfile"].splitlines() == [line, line.replace("node-0-0", "node-0-1")]


@pytest.mark.parametrize("launcher_as_node", [False, True])
@pytest.mark.parametrize("trainer, launcher_wants, worker_wants", [
    ({"image": "mine:1"}, ("mine:1", None), ("mine:1", None)),
    ({"image": "mine:1", "command": ["mpirun"], "args": ["-n", "2"]}, ("mine:1", ["mpirun"]), ("mine:1", None)),
    ({"command": ["mpirun"]}, ("l", ["mpirun"]), ("w", None)),
    ({}, ("l", None), ("w", None)),
])
def test_mpi_trainer_image_reaches_launcher_and_workers_command_only_the_launcher(launcher_as_node, trainer,
                                                                                  launcher_wants, worker_wants):
    """Kubeflow Trainer v2.4 (kubeflow/trainer#4301): the TrainJob's image runs on both; the workers keep sshd."""
    js = the_jobset(build(trainjob(trainer=trainer), mpi_runtime(launcher_as_node=launcher_as_node)))
    for name, (image, command) in (("launcher", launcher_wants), ("node", worker_wants)):
        assert (container(js, name)["image"], container(js, name).get("command")) == (image, command), name
    assert "args" not in container(js, "node")


def test_a_torch_runtimes_other_jobs_keep_their_image():
    rt = runtime(jobs=[job("node", "trainer"), job("evaluate", None, [{"name": "node", "image": "eval:1"}])])
    js = the_jobset(build(trainjob(trainer={"image": "mine:1"}), rt))
    assert (container(js, "node")["image"], container(js, "evaluate")["image"]) == ("mine:1", "eval:1")


def test_open_mpi_5_reads_the_same_settings_under_prte_names_without_fqdn_hostnames():
    """Kubeflow Trainer v2.4 (kubeflow/trainer#4029)."""
    env = dict(env_of(container(the_jobset(build(trainjob(trainer={"numNodes": 2}), mpi_runtime(gpus=4))),
                                "launcher")))
    assert env["PRTE_MCA_prte_default_hostfile"] == env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["PRTE_MCA_prte_set_default_slots"] == env["OMPI_MCA_orte_set_default_slots"] == "4"
    assert env["PRTE_MCA_plm_ssh_args"] == env["OMPI_MCA_plm_rsh_args"]
    assert (env["OMPI_MCA_orte_keep_fqdn_hostnames"], env["PRTE_MCA_prte_keep_fqdn_hostnames"]) == ("true", "false")


def test_mpi_ssh_secret_volumes_and_mounts():
    objects = build(trainjob(), mpi_runtime())
    (secret,) = by_kind(objects, "Secret")
    assert secret["type"] == "kubernetes.io/ssh-auth" and secret["immutable"] is True
    assert base64.b64decode(secret["data"]["ssh-privatekey"]) == fixed_key()[0]
    assert base64.b64decode(secret["data"]["ssh-publickey"]) == fixed_key()[1]
    js = the_jobset(objects)
    for name in ("launcher", "node"):
        pod = rjob(js, name)["template"]["spec"]["template"]["spec"]
        volume = next(v for v in pod["volumes"] if v["name"] == "mpi-ssh-auth")
        assert volume["secret"]["secretName"] == "tj-mpi-ssh-auth" and volume["secret"]["defaultMode"] == 0o400
        assert {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"} in container(js, name)["volumeMounts"]


def test_mpi_secret_reused_when_it_exists():
    existing = [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tj-mpi-ssh-auth", "namespace": "ns"}}]
    assert by_kind(build(trainjob(), mpi_runtime(), existing), "Secret") == []


def test_mpi_real_key_is_ecdsa_p521():
    objects = build_objects(trainjob(), mpi_runtime())
    pem = base64.b64decode(by_kind(objects, "Secret")[0]["data"]["ssh-privatekey"])
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    key = load_pem_private_key(pem, None)
    assert pem.startswith(b"-----BEGIN EC PRIVATE KEY-----") and key.curve.name == "secp521r1"
    assert base64.b64decode(by_kind(objects, "Secret")[0]["data"]["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 ")


@pytest.mark.parametrize("launcher_as_node,num_nodes,node_count,hosts", [
    (False, 3, 3, ["tj-node-0-0.tj", "tj-node-0-1.tj", "tj-node-0-2.tj"]),
    (True, 3, 2, ["tj-launcher-0-0.tj", "tj-node-0-0.tj", "tj-node-0-1.tj"]),
    (True, 1, 1, ["tj-launcher-0-0.tj", "tj-node-0-0.tj"]),
])
def test_mpi_run_launcher_as_node(launcher_as_node, num_nodes, node_count, hosts):
    objects = build(trainjob(trainer={"numNodes": num_nodes}), mpi_runtime(launcher_as_node=launcher_as_node))
    assert rjob(the_jobset(objects), "node")["template"]["spec"]["parallelism"] == node_count
    lines = by_kind(objects, "ConfigMap")[1]["data"]["hostfile"].splitlines()
    assert [line.split()[0] for line in lines] == hosts


@pytest.mark.parametrize("runtime_nproc,gpus,trainer_nproc,slots", [(1, 4, None, "4"), (2, 4, None, "2"), (1, 4, 3, "3"), (1, None, None, "1")])
def test_mpi_slots(runtime_nproc, gpus, trainer_nproc, slots):
    trainer = {} if trainer_nproc is None else {"numProcPerNode": trainer_nproc}
    objects = build(trainjob(trainer=trainer), mpi_runtime(nproc=runtime_nproc, gpus=gpus))
    assert dict(env_of(container(the_jobset(objects), "launcher")))["OMPI_MCA_orte_set_default_slots"] == slots


def test_mpi_rejects_string_num_proc():
    with pytest.raises(ValidationError, match="must be an integer for MPI"):
        build(trainjob(trainer={"numProcPerNode": "auto"}), mpi_runtime())


# ---- JAX / XGBoost / Flux --------------------------------------------------------------------------

def test_jax_env():
    node = container(the_jobset(build(trainjob(trainer={"numNodes": 2}), runtime(ml={"jax": {}}))), "node")
    assert env_of(node) == [("JAX_NUM_PROCESSES", "2"), ("JAX_PROCESS_ID", NODE_RANK), ("JAX_COORDINATOR_ADDRESS", "tj-node-0-0.tj:29500")]


def test_xgboost_env_counts_gpus():
    tj = trainjob(trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}, "env": [{"name": "T", "value": "t"}]})
    node = container(the_jobset(build(tj, runtime(ml={"xgboost": {}}))), "node")
    assert env_of(node) == [("T", "t"), ("DMLC_TRACKER_URI", "tj-node-0-0.tj"), ("DMLC_TRACKER_PORT", "29500"),
                            ("DMLC_TASK_ID", NODE_RANK), ("DMLC_NUM_WORKER", "8")]


@pytest.mark.parametrize("resources_per_node,workers", [
    ({}, "4"),                                    # set but empty: the TrainJob's (no GPU), as upstream
    ({"limits": {"nvidia.com/gpu": 2}}, "8"),
    (None, "32"),                                 # unset: the runtime's 8 GPUs per node
], ids=["empty", "two-gpus", "unset"])
def test_xgboost_workers_follow_the_trainjob_resources_whenever_they_are_set(resources_per_node, workers):
    """Found by the differential tests against upstream (case gen-143): `{}` was read as unset."""
    trainer = {"numNodes": 4, **({"resourcesPerNode": resources_per_node} if resources_per_node is not None else {})}
    rt = runtime(jobs=[job("node", "trainer", containers=[{"name": "node", "image": "img",
                                                         "resources": {"limits": {"nvidia.com/gpu": "8"}}}])],
                 ml={"xgboost": {}})
    node = container(the_jobset(build(trainjob(trainer=trainer), rt)), "node")
    assert dict(env_of(node))["DMLC_NUM_WORKER"] == workers


# ---- PodGroups ---------------------------------------------------------------------------------------

def gang_runtime(policy, **kw):
    init = [{"name": "dataset-initializer", "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}}]
    node = [{"name": "node", "resources": {"requests": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 1}}},
            {"name": "sidecar", "resources": {"requests": {"cpu": "500m"}, "limits": {"example.com/fpga": 2}}}]
    return runtime(ml={"torch": {}}, pod_group=policy, jobs=[
        job("dataset-initializer", "dataset-initializer", init),
        job("node", "trainer", node, init_containers=[{"name": "prep", "resources": {"requests": {"cpu": "4"}}}], **kw)], **{})


def test_coscheduling_pod_group_and_label():
    objects = build(trainjob(trainer={"numNodes": 3}), gang_runtime({"coscheduling": {"scheduleTimeoutSeconds": 120}}))
    (pg,) = by_kind(objects, "PodGroup")
    assert pg["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and pg["metadata"]["name"] == "tj"
    # 1 initializer pod + 3 nodes; node pod cpu = max(2.5 containers, 4 init) = 4
    assert pg["spec"] == {"minMember": 4, "scheduleTimeoutSeconds": 120, "minResources": {
        "cpu": "13", "example.com/fpga": "6", "memory": "3584Mi", "nvidia.com/gpu": "3"}}
    js = the_jobset(objects)
    for name in ("dataset-initializer", "node"):
        assert rjob(js, name)["template"]["spec"]["template"]["metadata"]["labels"] == {"scheduling.x-k8s.io/pod-group": "tj"}


def test_volcano_pod_group_queue_priority_topology():
    rt = gang_runtime({"volcano": {"networkTopology": {"mode": "soft", "highestTierAllowed": 2}}}, priorityClassName="high")
    rt["spec"]["template"]["metadata"] = {"annotations": {"scheduling.volcano.sh/queue-name": "runtime-q"}}
    objects = build(trainjob(annotations={"scheduling.volcano.sh/queue-name": "tenant-q"}), rt)
    (pg,) = by_kind(objects, "PodGroup")
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert (pg["spec"]["queue"], pg["spec"]["priorityClassName"], pg["spec"]["minMember"]) == ("tenant-q", "high", 2)
    assert pg["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 2}
    js = the_jobset(objects)
    assert js["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "tenant-q"
    node = rjob(js, "node")
    assert node["template"]["spec"]["template"]["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "tj"}
    assert node["template"]["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "tj"
    assert "schedulerName" not in node["template"]["spec"]["template"]["spec"]


def test_volcano_queue_via_runtime_patch_and_last_priority_class_wins():
    rt = runtime(pod_group={"volcano": {}}, jobs=[job("a", None, priorityClassName="first"), job("node", "trainer", priorityClassName="last")])
    patch = {"manager": "x.io/m", "trainingRuntimeSpec": {"template": {"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "pq"}}}}}
    (pg,) = by_kind(build(trainjob(runtimePatches=[patch]), rt), "PodGroup")
    assert pg["spec"]["queue"] == "pq" and pg["spec"]["priorityClassName"] == "last"


@pytest.mark.parametrize("suspend,expect_pod_group", [(False, False), (True, True)])
def test_existing_pod_group_only_reapplied_while_suspended(suspend, expect_pod_group):
    existing = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "tj", "namespace": "ns"}}]
    objects = build(trainjob(suspend=suspend), runtime(pod_group={"volcano": {}}), existing)
    assert bool(by_kind(objects, "PodGroup")) == expect_pod_group


def test_extended_resources_limit_mirrored_and_limits_only_counted():
    rt = runtime(pod_group={"volcano": {}}, jobs=[job("node", "trainer", [
        {"name": "node", "resources": {"requests": {"nvidia.com/gpu": 2, "cpu": "1"}}},
        {"name": "b", "resources": {"limits": {"vendor.io/nic": "1", "cpu": "2"}}}])])
    objects = build(trainjob(), rt)
    js = the_jobset(objects)
    assert container(js, "node")["resources"]["limits"] == {"nvidia.com/gpu": 2}
    assert "requests" not in container(js, "node", "b")["resources"]
    (pg,) = by_kind(objects, "PodGroup")
    assert pg["spec"]["minResources"] == {"cpu": "1", "nvidia.com/gpu": "2", "vendor.io/nic": "1"}  # limits-only cpu not counted


# ---- JobSet (re)apply rules --------------------------------------------------------------------------

@pytest.mark.parametrize("tj_suspend,js_suspend,existing,expected", [
    (False, False, False, True), (False, False, True, False), (True, False, True, True), (False, True, True, True)])
def test_may_apply_jobset(tj_suspend, js_suspend, existing, expected):
    jobset = {"kind": "JobSet", "metadata": {"name": "tj", "namespace": "ns"}, "spec": {"suspend": js_suspend}} if existing else None
    assert may_apply_jobset(trainjob(suspend=tj_suspend), jobset) is expected
    objects = build(trainjob(suspend=tj_suspend), runtime(), [jobset] if jobset else [])
    assert bool(by_kind(objects, "JobSet")) is expected


def test_suspend_copied_to_jobset():
    assert the_jobset(build(trainjob(suspend=True), runtime()))["spec"]["suspend"] is True
