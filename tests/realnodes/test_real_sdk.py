"""The Kubeflow SDK for real: a data scientist's `TrainerClient().train(CustomTrainer(func=...))` runs the
function on two real nodes and `get_job_logs()` returns what it printed.

The function is shipped by the SDK inside the TrainJob (no image build); the SDK's own options name the locally
built image (`CustomTrainer(image=...)`) and the real nodes (`RuntimePatch`: nodeSelector, toleration, one pod per
node), so the catalog release stays as it is."""

from __future__ import annotations

import re

import pytest

from trainyard.cluster.local import user_kubeconfig
from trainyard.cluster.real_node_spec import REAL_NODE_LABEL, real_node_name
from realcluster import NAME, REAL_NODES

pytestmark = pytest.mark.integration

LOCAL_IMAGE = "trainyard.local/training:local"


def real_node_patch(claim: str | None = None):
    """The real nodes (nodeSelector, toleration, one pod per node); with `claim`, that PVC at /checkpoints."""
    from kubeflow.trainer.options.kubernetes import (ContainerPatch, JobSetSpecPatch, JobSetTemplatePatch, JobSpecPatch,
                                                      JobTemplatePatch, PodSpecPatch, PodTemplatePatch,
                                                      ReplicatedJobPatch, RuntimePatch, TrainingRuntimeSpecPatch)

    spread = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/replicatedjob-name": "node"}},
        "matchLabelKeys": ["jobset.sigs.k8s.io/jobset-name"]}]}}
    volumes = {}
    if claim:
        volumes = {"volumes": [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": claim}}],
                   "containers": [ContainerPatch(name="node", volume_mounts=[{"name": "checkpoints",
                                                                             "mountPath": "/checkpoints"}])]}
    pod = PodSpecPatch(node_selector={REAL_NODE_LABEL: "true"}, affinity=spread,
                       tolerations=[{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}], **volumes)
    node = ReplicatedJobPatch(name="node", template=JobTemplatePatch(spec=JobSpecPatch(template=PodTemplatePatch(spec=pod))))
    return RuntimePatch(training_runtime_spec=TrainingRuntimeSpecPatch(
        template=JobSetTemplatePatch(spec=JobSetSpecPatch(replicated_jobs=[node]))))


def test_the_sdk_runs_a_function_on_two_real_nodes_and_reads_its_logs(real_cluster):
    from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient

    kubeconfig = user_kubeconfig(NAME, "alice", ("team-a-users",))
    client = TrainerClient(KubernetesBackendConfig(namespace="team-a", config_file=str(kubeconfig)))

    def train():
        import os

        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo")
        total = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(total)
        print(f"sdk rank {dist.get_rank()} of {dist.get_world_size()} sum {total.item():.0f} "
              f"on {os.environ['HOSTNAME']}")
        dist.destroy_process_group()

    name = client.train(runtime=client.get_runtime("torch-distributed-volcano"),
                        trainer=CustomTrainer(func=train, image=LOCAL_IMAGE, num_nodes=REAL_NODES,
                                              resources_per_node={"cpu": "500m", "memory": "1Gi", "gpu": 1}),
                        options=[real_node_patch()])
    try:
        job = client.wait_for_job_status(name, status={"Complete"}, timeout=300, polling_interval=2)
        assert job.num_nodes == REAL_NODES
        assert sorted(step.device_count for step in job.steps if step.name.startswith("node")) in (["1", "1"], [1, 1])
        pods = real_cluster.items("pods", "-n", "team-a", "-l", f"jobset.sigs.k8s.io/jobset-name={name}")
        assert sorted(p["spec"]["nodeName"] for p in pods) == [real_node_name(i) for i in range(REAL_NODES)]
        text = "\n".join(client.get_job_logs(name))
        # node-0's processes print concurrently: two lines can run together, so match records, not lines
        printed = re.findall(rf"sdk rank (\d+) of (\d+) sum (\d+) on {re.escape(name)}-node-0-0", text)
        assert printed, text[-2000:]
        world = int(printed[0][1])
        assert world >= REAL_NODES and world % REAL_NODES == 0, printed
        assert sorted(printed) == [(str(r), str(world), str(world * (world + 1) // 2)) for r in range(world // REAL_NODES)], \
            "node-0's processes, each with the right all-reduce"
    finally:
        client.delete_job(name)


def test_an_sdk_function_checkpoints_with_the_platforms_helper_and_the_platform_sees_it(real_cluster):
    """A `CustomTrainer` function imports the training image's `trainyard_checkpoint`, saves every 2 steps to a
    PVC the SDK's `RuntimePatch` mounts, and the controller's status server records each checkpoint in
    trainerStatus (what reclaim counts lost work from): the protocol works from the SDK path, from real pods."""
    import yaml
    from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient

    from trainyard import k8s as K
    from trainyard.scheduling.checkpoints import last_checkpoint

    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "sdk-ckpt", "namespace": "team-a"},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    assert real_cluster.kubectl("create", "-f", "-", input_text=yaml.safe_dump(pvc)).returncode == 0
    kubeconfig = user_kubeconfig(NAME, "alice", ("team-a-users",))
    client = TrainerClient(KubernetesBackendConfig(namespace="team-a", config_file=str(kubeconfig)))

    def train():
        import torch
        import torch.distributed as dist
        from trainyard_checkpoint import Checkpointer

        dist.init_process_group("gloo")
        ckpt = Checkpointer(every_steps=2)
        state = ckpt.load()
        model = torch.nn.Linear(2, 1)
        for step in range(state["step"] + 1 if state else 0, 4):
            if ckpt.due(step):
                ckpt.save(step, {"model": model.state_dict()})
        dist.destroy_process_group()

    name = client.train(runtime=client.get_runtime("torch-distributed-volcano"),
                        trainer=CustomTrainer(func=train, image=LOCAL_IMAGE, num_nodes=REAL_NODES,
                                              resources_per_node={"cpu": "500m", "memory": "1Gi", "gpu": 1}),
                        options=[real_node_patch("sdk-ckpt")])
    try:
        client.wait_for_job_status(name, status={"Complete"}, timeout=300, polling_interval=2)
        text = "\n".join(client.get_job_logs(name))
        assert "checkpoint saved at step 1" in text and "checkpoint saved at step 3" in text, text[-2000:]
        trainjob = real_cluster.get("trainjobs.trainer.kubeflow.org", name, "team-a")
        checkpoint = last_checkpoint(trainjob)
        assert checkpoint is not None and checkpoint.step == 3, (trainjob.get("status") or {}).get("trainerStatus")
        metrics = {m["name"] for m in trainjob["status"]["trainerStatus"]["metrics"]}
        assert {K.CHECKPOINT_STEP_METRIC, K.CHECKPOINT_TIME_METRIC} <= metrics
    finally:
        client.delete_job(name)
        real_cluster.kubectl("delete", "pvc", "sdk-ckpt", "-n", "team-a", "--wait=false")
