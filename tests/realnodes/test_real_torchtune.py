"""The catalog's torchtune runtimes on real nodes: the dataset and model initializers write into the shared
`initializer` volume, the trainer waits for both, then `tune run` fine-tunes from that volume.

The machine cannot reach Hugging Face, so the TrainJobs point the initializers (`spec.initializer.*.storageUri`)
at the training image's stand-in (`tiny://...`, tools/images/training/scripts/initializer.py): a generated
instruct set and a 2-layer model in the family's Hugging Face layout. The trainer is the runtime's own
`tune run` as the controller rewrites it (single-device recipe and config chosen from the runtime's name), with
`key=value` arguments that shrink the model and run on CPU (torchtune's distributed recipe needs CUDA).

A torchtune runtime's name names its model, so the local copies cannot take a suffix: they live in a namespace
of their own, made a tenant namespace of team-a's queue. There the gang leaves the initializers out (they
finish before the trainer exists; upstream's gang counts them and would never start)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from realcluster import trainyard
from test_real_catalog_runtimes import LOCAL_IMAGE, current_release, scheduling_picture
from waiting import wait_for

pytestmark = pytest.mark.integration

NAMESPACE = "tune-real"
QUEUE = "team-a"
DATASET = "tiny://instruct-dataset"
TINY = ["model.num_layers=2", "model.num_heads=4", "model.num_kv_heads=2", "model.embed_dim=64",
        "model.max_seq_len=512", "model.intermediate_dim=128"]
DATASET_ARGS = ["dataset=torchtune.datasets.instruct_dataset", "dataset.source=parquet",
                "dataset.data_dir=/workspace/dataset/data"]
"""As the Kubeflow SDK's TorchTuneConfig writes them: the controller's `tune run` keeps only the runtime's output,
tokenizer and checkpoint paths (upstream's immutable configs), so the dataset comes from the TrainJob."""
CPU_RUN = ["device=cpu", "dtype=fp32", "optimizer._component_=torch.optim.AdamW", "optimizer.lr=3e-3",
           "batch_size=8", "epochs=1", "max_steps_per_epoch=12", "enable_activation_checkpointing=False",
           "metric_logger._component_=torchtune.training.metric_logging.StdoutLogger"]
LLAMA = ["model._component_=torchtune.models.llama3_2.llama3_2", "model.vocab_size=128256", *TINY]
QWEN = ["model._component_=torchtune.models.qwen2.qwen2", "model.vocab_size=151936", "model.tie_word_embeddings=True",
        *TINY]
TORCHTUNE = {"torchtune-llama3.2-1b": ("tiny://llama3.2-1b", LLAMA), "torchtune-llama3.2-3b": ("tiny://llama3.2-3b", LLAMA),
             "torchtune-qwen2.5-1.5b": ("tiny://qwen2.5-1.5b", QWEN)}
"""Each torchtune runtime of the current release: the stand-in model URI (the real model's file layout) and the
arguments of its tiny run."""
GROUP = "scheduling.k8s.io/group-name"


def trainjob(runtime: str) -> dict:
    model_uri, model_args = TORCHTUNE[runtime]
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": runtime.replace(".", "-"), "namespace": NAMESPACE},
            "spec": {"runtimeRef": {"name": runtime, "kind": "TrainingRuntime"},
                     "initializer": {"dataset": {"storageUri": DATASET}, "model": {"storageUri": model_uri}},
                     "trainer": {"command": ["tune", "run"], "args": [*DATASET_ARGS, *model_args, *CPU_RUN],
                                 "numNodes": 1,
                                 "numProcPerNode": 1,
                                 "resourcesPerNode": {"requests": {"cpu": "250m", "memory": "512Mi"},
                                                      "limits": {"memory": "3Gi"}}}}}


def pods(cluster, name: str) -> dict[str, dict]:
    """The TrainJob's pods by replicated job."""
    items = cluster.items("pods", "-n", NAMESPACE, "-l", f"jobset.sigs.k8s.io/jobset-name={name}")
    return {p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]: p for p in items}


def terminal(cluster, name: str) -> dict | None:
    status = (cluster.get("trainjobs.trainer.kubeflow.org", name, NAMESPACE) or {}).get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] in ("Complete", "Failed")
                 and c["status"] == "True"), None)


def log_of(cluster, pod: dict) -> str:
    out = cluster.kubectl("logs", "-n", NAMESPACE, pod["metadata"]["name"])
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_every_torchtune_runtime_of_the_current_release_has_a_run():
    assert {n for n in current_release()["runtimes"] if n.startswith("torchtune-")} == set(TORCHTUNE)


@pytest.fixture(scope="module")
def runs(real_cluster):
    """All three TrainJobs at once (each is one CPU process; together they take the time of about two), run to
    the end; yields {runtime: (TrainJob name, terminal condition, pods by job, their logs, the PodGroup)}."""
    labels = {"trainyard.dev/queue": QUEUE}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": labels}}
    assert real_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(namespace)).returncode == 0
    shown = [trainyard("catalog", "show", current_release()["version"], runtime, "--tenant-queue", QUEUE,
                       "--namespace", NAMESPACE, "--priority-class", "team-a-default", "--image",
                       f"all={LOCAL_IMAGE}", "--real-nodes") for runtime in TORCHTUNE]
    assert all(s.returncode == 0 for s in shown), [s.stderr for s in shown]
    applied = real_cluster.kubectl("apply", "--server-side", "-f", "-", input_text="".join(s.stdout for s in shown))
    assert applied.returncode == 0, applied.stderr
    names = {}
    for runtime in TORCHTUNE:
        created = real_cluster.kubectl("create", "-f", "-", "-o", "name", input_text=yaml.safe_dump(trainjob(runtime)))
        assert created.returncode == 0, created.stderr
        names[runtime] = created.stdout.strip().split("/")[-1]
    results = {}
    try:
        for runtime, name in names.items():
            condition = wait_for(lambda n=name: terminal(real_cluster, n), 420, f"TrainJob {name} to finish", 2,
                                 error=None)
            assert condition, f"{name} did not finish:\n{scheduling_picture(real_cluster, name, NAMESPACE)}"
            by_job = pods(real_cluster, name)
            group = wait_for(lambda n=name: (g := real_cluster.get("podgroups.scheduling.volcano.sh", n, NAMESPACE))
                             and (g.get("status") or {}).get("phase") in ("Completed", "Failed") and g, 60,
                             f"Volcano to settle the PodGroup of {name}", 1, error=None) \
                or real_cluster.get("podgroups.scheduling.volcano.sh", name, NAMESPACE)
            results[runtime] = (name, condition, by_job, {job: log_of(real_cluster, p) for job, p in by_job.items()},
                                group)
        yield results
    finally:
        real_cluster.kubectl("delete", "namespace", NAMESPACE, "--timeout=180s")


@pytest.mark.parametrize("runtime", sorted(TORCHTUNE))
def test_initializers_fill_the_shared_volume_and_the_trainer_fine_tunes_from_it(runs, runtime):
    name, condition, by_job, texts, group = runs[runtime]
    assert condition["type"] == "Complete", (condition, {job: text[-1500:] for job, text in texts.items()})
    assert set(by_job) == {"dataset-initializer", "model-initializer", "node"}
    assert "initializer: dataset of 96 rows at /workspace/dataset/data/train.parquet" in texts["dataset-initializer"]
    family = "qwen2" if "qwen" in runtime else "llama"
    assert f"initializer: tiny {family} (2 layers, dim 64) at /workspace/model" in texts["model-initializer"]
    trainer = texts["node"]
    losses = [float(x) for x in re.findall(r"Step \d+ \| loss:([\d.]+)", trainer)]
    assert len(losses) == 12 and losses[-1] < losses[0] - 1.0, losses
    assert "saved to /workspace/output/epoch_0/" in trainer, "the checkpoint written back to the shared volume"
    (volume,) = [v for v in by_job["node"]["spec"]["volumes"] if v["name"] == "initializer"]
    claims = {v["persistentVolumeClaim"]["claimName"] for p in by_job.values() for v in p["spec"]["volumes"]
              if v["name"] == "initializer"}
    assert claims == {volume["persistentVolumeClaim"]["claimName"]}, "one volume for the three pods"
    # the gang is the trainer alone; each initializer ran in a one-pod group of Volcano's, in the tenant's queue
    assert group["spec"]["minMember"] == 1 and group["spec"]["queue"] == QUEUE
    assert group["status"]["phase"] == "Completed", "kept: a Completed group reserves nothing in the queue"
    assert by_job["node"]["metadata"]["annotations"][GROUP] == name
    for job in ("dataset-initializer", "model-initializer"):
        annotations = by_job[job]["metadata"]["annotations"]
        assert annotations[GROUP] != name and annotations["scheduling.volcano.sh/queue-name"] == QUEUE
        assert by_job[job]["spec"]["schedulerName"] == "volcano"
