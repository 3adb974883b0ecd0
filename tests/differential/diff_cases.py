"""The differential cases: the current catalog release, the seeds and generated TrainJob/runtime pairs (valid
ones, reconciled by both controllers), plus a table of invalid TrainJobs (refused by both webhooks).

Everything here is pure and deterministic: the same cases, in the same order, on every run.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import yaml
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from builders import new_trainjob

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
API = f"{GROUP}/{VERSION}"
SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
QUEUE_KEY = "scheduling.volcano.sh/queue-name"
GENERATED = 210  # property-generated pairs (at least 200 must pass upstream's admission)
SEED = 20261123


@dataclass
class Case:
    """One TrainJob and the runtime objects it needs. `runtimes` are ClusterTrainingRuntimes (cluster-scoped,
    created once per phase) or TrainingRuntimes (created in the phase's namespace)."""

    name: str  # the TrainJob's name, identical in both phases
    group: str  # catalog | seed | generated
    trainjob: dict
    runtimes: list[dict] = field(default_factory=list)


suspended_trainjob = partial(new_trainjob, suspend=True)
"""A SUSPENDED TrainJob: its JobSet is created suspended, so no pod runs and the status is the same
whenever it is read (Suspended, jobsStatus of suspended jobs) on both sides."""


# --------------------------------------------------------------------------- catalog
MPI_IMAGE_CASES = ("deepspeed-distributed", "openmpi-distributed")
"""Catalog MPI runtimes (launcher with the trainer label, workers without) also run with a TrainJob image."""


def catalog_cases() -> list[Case]:
    """Every runtime of the current catalog release as the platform renders it (ClusterTrainingRuntimes under
    their stable names; torchtune derives the model from the name), each with a minimal TrainJob."""
    from trainyard.runtimes.publish import render_cluster_runtimes
    from trainyard.runtimes.store import load_catalog

    cases = []
    for runtime in render_cluster_runtimes(load_catalog()):
        name = runtime["metadata"]["name"]
        case = f"cat-{name.replace('.', '-')}"
        cases.append(Case(case, "catalog", suspended_trainjob(case, name, "ClusterTrainingRuntime"), [runtime]))
        if name in MPI_IMAGE_CASES:  # v2.4's TrainJob image on launcher and workers (kubeflow/trainer#4301)
            cases.append(Case(f"{case}-img", "catalog", suspended_trainjob(
                f"{case}-img", name, "ClusterTrainingRuntime", trainer={"image": "example.com/mpi-app:1.0"}), [runtime]))
    return cases


def catalog_version() -> str:
    from trainyard.runtimes.store import load_catalog

    return load_catalog().current.version


# --------------------------------------------------------------------------- seeds
def _seed(name: str) -> dict:
    obj = yaml.safe_load((SEEDS / name).read_text())
    obj["metadata"].pop("namespace", None)  # created in the phase's namespace
    if obj["apiVersion"].startswith(GROUP + "/"):
        obj["apiVersion"] = API  # the seeds say v2alpha1, which upstream does not serve (same schema)
    return obj


def seed_index() -> dict:
    return yaml.safe_load((SEEDS / "index.yaml").read_text())


def seed_cluster_objects() -> list[dict]:
    """What the seeds name but never create: queues and priority classes (created once, before both phases)."""
    objects = [_seed(extra) for pair in seed_index()["pairs"] for extra in pair.get("cluster", [])]
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "Queue"}
    for queue in ("urgent-queue",) + tuple(sorted({"high-priority-queue"} - names)):
        objects.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": queue},
                        "spec": {"weight": 1}})
    objects.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": "high-priority"}, "value": 1000})
    return objects


def seed_cases() -> list[Case]:
    """Every seed runtime (renamed after its file: two seeds share a name, and some share catalog names),
    with its seed TrainJob where the index pairs one, else a minimal TrainJob."""
    index = seed_index()
    paired = {p["runtime"]: p for p in index["pairs"] if not p.get("rejected")}
    cases = []
    for number, file in enumerate(index["runtimes"]):
        runtime = _seed(file)
        stem = file.removesuffix(".yaml")
        runtime["metadata"]["name"] = stem
        kind = runtime["kind"]
        pair = paired.get(file)
        if pair:
            tj = _seed(pair["trainjob"])
            tj["metadata"] = {"name": f"seed-{tj['metadata']['name']}"}
            tj["spec"]["runtimeRef"] = {"name": stem, "kind": kind}
            tj["spec"]["suspend"] = True
        else:
            tj = suspended_trainjob(f"seed-{number}", stem, kind)  # short: JobSet refuses names whose pods exceed 63
        cases.append(Case(tj["metadata"]["name"], "seed", tj, [runtime]))
    return cases


def rejected_seed_pairs() -> list[tuple[dict, dict]]:
    """Seed TrainJobs the index says upstream refuses (for the admission table)."""
    out = []
    for pair in seed_index()["pairs"]:
        if pair.get("rejected"):
            runtime = _seed(pair["runtime"])
            stem = pair["runtime"].removesuffix(".yaml")
            runtime["metadata"]["name"] = stem
            tj = _seed(pair["trainjob"])
            tj["metadata"] = {"name": "bad-seed-" + pair["trainjob"].split("-", 2)[-1].removesuffix(".yaml")[:40]}
            tj["spec"]["runtimeRef"] = {"name": stem, "kind": runtime["kind"]}
            tj["spec"]["suspend"] = True
            out.append((tj, runtime))
    return out


# --------------------------------------------------------------------------- generated pairs
IMAGES = st.sampled_from(["pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", "docker.io/team/train:v1",
                          "ghcr.io/kubeflow/trainer/jax-runtime:v2.3.0"])
QUANT = {"cpu": st.sampled_from(["1", "2", "500m", "8"]), "memory": st.sampled_from(["1Gi", "16Gi", "512Mi"]),
         "nvidia.com/gpu": st.sampled_from(["1", "2", "4", "8"])}


@st.composite
def resources(draw) -> dict:
    out = {}
    for part in draw(st.sampled_from([(), ("requests",), ("limits",), ("requests", "limits")])):
        keys = draw(st.lists(st.sampled_from(sorted(QUANT)), min_size=1, max_size=3, unique=True))
        out[part] = {k: draw(QUANT[k]) for k in keys}
    if "requests" in out and "limits" in out:  # requests must not exceed limits: use the same values
        out["requests"] = {k: out["limits"].get(k, v) for k, v in out["requests"].items()}
        for k in out["requests"]:
            out["limits"].setdefault(k, out["requests"][k])
    return out


ENV_NAMES = st.sampled_from(["LOG_LEVEL", "DATA_DIR", "HF_HOME", "EPOCHS", "NCCL_DEBUG"])


def env_list(draw, max_size: int = 3) -> list[dict]:
    names = draw(st.lists(ENV_NAMES, max_size=max_size, unique=True))
    return [{"name": n, "value": draw(st.sampled_from(["1", "info", "/data", "x y"]))} for n in names]


def _pod(container: dict, volcano: bool, extra: dict | None = None) -> dict:
    spec = {"containers": [container], **(extra or {})}
    if volcano:
        spec["schedulerName"] = "volcano"
    return {"spec": spec}


def _rjob(name: str, ancestor: str | None, pod: dict, replicas: int | None = None) -> dict:
    job: dict = {"name": name, "template": {"spec": {"template": pod}}}
    if ancestor:
        job["template"]["metadata"] = {"labels": {ANCESTOR: ancestor}}
    if replicas is not None:
        job["replicas"] = replicas
    return job


def _initializer(name: str, mount: str) -> dict:
    container = {"name": name, "image": "ghcr.io/kubeflow/trainer/dataset-initializer:v2.3.0",
                 "volumeMounts": [{"name": "initializer", "mountPath": mount}]}
    return _rjob(name, name, {"spec": {"containers": [container],
                                       "volumes": [{"name": "initializer", "emptyDir": {}}]}})


@st.composite
def generated_pair(draw, index: int) -> tuple[dict, dict]:
    """A valid-looking TrainingRuntime and a TrainJob naming it (upstream admission decides)."""
    name = f"gen-{index:03d}"
    framework = draw(st.sampled_from(["torch", "torch", "torch", "mpi", "jax", "xgboost", "plain"]))
    ml: dict = {}
    if draw(st.booleans()):
        ml["numNodes"] = draw(st.integers(1, 4))
    if framework == "torch":
        ml["torch"] = draw(st.fixed_dictionaries({}, optional={
            "numProcPerNode": st.one_of(st.sampled_from(["auto", "cpu", "gpu"]), st.integers(1, 8))}))
    elif framework == "mpi":
        ml["mpi"] = draw(st.fixed_dictionaries({"mpiImplementation": st.just("OpenMPI")}, optional={
            "numProcPerNode": st.integers(1, 4), "runLauncherAsNode": st.booleans()}))
    elif framework in ("jax", "xgboost"):
        ml[framework] = {}
    volcano = draw(st.booleans())
    spec: dict = {}
    if ml:
        spec["mlPolicy"] = ml
    if volcano:
        spec["podGroupPolicy"] = {"volcano": draw(st.sampled_from([
            {}, {"networkTopology": {"mode": "soft", "highestTierAllowed": 1}},
            {"networkTopology": {"mode": "hard", "highestTierAllowed": 2}}]))}
    container: dict = {"name": "node", "image": draw(IMAGES)}
    if draw(st.booleans()):
        container["command"] = draw(st.sampled_from([["torchrun", "train.py"], ["python", "-m", "train"], ["bash", "-c", "echo hi"]]))
    res = draw(resources())
    if res:
        container["resources"] = res
    env = env_list(draw)
    if env:
        container["env"] = env
    pod_extra = draw(st.fixed_dictionaries({}, optional={
        "nodeSelector": st.just({"nvidia.com/gpu.present": "true"}),
        "tolerations": st.just([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        "restartPolicy": st.sampled_from(["OnFailure", "Never"])}))
    jobs = []
    initializers = framework != "mpi" and draw(st.booleans())
    if initializers:
        jobs += [_initializer("dataset-initializer", "/workspace/dataset"),
                 _initializer("model-initializer", "/workspace/model")]
    if framework == "mpi":
        launcher = {"name": "node", "image": container["image"], "command": ["mpirun", "python", "train.py"]}
        jobs.append(_rjob("launcher", None, _pod(launcher, volcano)))
    jobs.append(_rjob("node", "trainer", _pod(container, volcano, pod_extra),
                      replicas=draw(st.sampled_from([None, 1]))))
    template: dict = {"spec": {"replicatedJobs": jobs}}
    meta = draw(st.fixed_dictionaries({}, optional={
        "labels": st.just({"team": "ml", "trainyard.dev/diff": "generated"}),
        "annotations": st.just({QUEUE_KEY: "default"} if volcano else {"note": "x"})}))
    if meta:
        template["metadata"] = meta
    if draw(st.booleans()):
        template["spec"]["network"] = {"publishNotReadyAddresses": True}
    if initializers and draw(st.booleans()):
        template["spec"]["successPolicy"] = {"operator": "All", "targetReplicatedJobs": ["node"]}
    spec["template"] = template
    runtime = {"apiVersion": API, "kind": "TrainingRuntime",
               "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": framework}}, "spec": spec}

    trainer = draw(st.fixed_dictionaries({}, optional={
        "numNodes": st.integers(1, 4), "image": IMAGES,
        "command": st.sampled_from([["torchrun", "train.py"], ["python", "train.py"]]),
        "args": st.sampled_from([["--epochs=3"], ["--lr", "0.1"]]),
        "resourcesPerNode": resources()}))
    if framework == "torch" and draw(st.booleans()):
        trainer["numProcPerNode"] = draw(st.integers(1, 8))
    env = env_list(draw)
    if env:
        trainer["env"] = env
    tj_spec: dict = {}
    if trainer:
        tj_spec["trainer"] = trainer
    if initializers and draw(st.booleans()):
        tj_spec["initializer"] = {"dataset": {"storageUri": "hf://tatsu-lab/alpaca"},
                                  "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct"}}
    if draw(st.integers(0, 3)) == 0:
        patch_spec = draw(st.sampled_from([
            {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
                "nodeSelector": {"trainyard.dev/rack": "rack-0"}}}}}}]},
            {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
                "metadata": {"labels": {"patched": "yes"}},
                "spec": {"serviceAccountName": "trainer-sa"}}}}}]},
        ]))
        tj_spec["runtimePatches"] = [{"manager": "trainyard.dev/diff-tests",
                                      "trainingRuntimeSpec": {"template": {"spec": patch_spec}}}]
    if draw(st.integers(0, 3)) == 0:
        tj_spec["activeDeadlineSeconds"] = draw(st.sampled_from([60, 3600]))
    tj = suspended_trainjob(name, name, "TrainingRuntime", **tj_spec)
    if draw(st.integers(0, 3)) == 0:
        tj["metadata"]["labels"] = {"project": "diff"}
    return tj, runtime


def generated_cases(count: int = GENERATED, seed: int = SEED) -> list[Case]:
    """`count` pairs from a derandomized hypothesis run (seeded, no database: the same pairs every run)."""
    drawn: list[tuple[dict, dict]] = []

    @settings(max_examples=count, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.data())
    def draw(data):
        drawn.append(data.draw(generated_pair(len(drawn))))

    draw()
    cases = [Case(tj["metadata"]["name"], "generated", tj, [rt]) for tj, rt in drawn[:count]]
    assert len(cases) == count, f"hypothesis gave {len(cases)} of {count} pairs"
    return cases


# --------------------------------------------------------------------------- invalid TrainJobs
TORCH_RT = "bad-torch"
MPI_RT = "bad-mpi"
LONG_JOB_NAME_RT = "bad-long-job-name"
TUNE_RT = "torchtune-llama3.2-1b"  # the catalog's (cluster-scoped, created by the phase)


def invalid_runtimes() -> list[dict]:
    torch = {"apiVersion": API, "kind": "TrainingRuntime", "metadata": {"name": TORCH_RT},
             "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
                 _rjob("node", "trainer", _pod({"name": "node", "image": "pytorch/pytorch:2.7.1"}, False))]}}}}
    mpi = {"apiVersion": API, "kind": "TrainingRuntime", "metadata": {"name": MPI_RT},
           "spec": {"mlPolicy": {"numNodes": 1, "mpi": {"mpiImplementation": "OpenMPI", "runLauncherAsNode": True}},
                    "template": {"spec": {"replicatedJobs": [
                        _rjob("node", "trainer", _pod({"name": "node", "image": "mpioperator/openmpi:v0.8.2"}, False))]}}}}
    long_name = {"apiVersion": API, "kind": "TrainingRuntime", "metadata": {"name": LONG_JOB_NAME_RT},
                 "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
                     _rjob("node", "trainer", _pod({"name": "node", "image": "pytorch/pytorch:2.7.1"}, False)),
                     _rjob("evaluation-after-training", None,
                           _pod({"name": "evaluate", "image": "pytorch/pytorch:2.7.1"}, False))]}}}}
    return [torch, mpi, long_name]


def _bad(name: str, runtime: str = TORCH_RT, kind: str = "TrainingRuntime", **spec) -> dict:
    return suspended_trainjob(name, runtime, kind, **spec)


def _patch(manager: str, job: str = "node", pod_spec: dict | None = None) -> list[dict]:
    return [{"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": job, "template": {"spec": {"template": {"spec": pod_spec or {"nodeSelector": {"a": "b"}}}}}}]}}}}]


def invalid_table() -> list[tuple[str, dict]]:
    """(case, TrainJob) pairs every Kubeflow Trainer v2.3.0 controller must refuse at create."""
    table = [
        ("numNodes-negative", _bad("bad-nn-neg", trainer={"numNodes": -3})),
        ("numProcPerNode-zero", _bad("bad-npp-zero", trainer={"numProcPerNode": 0})),
        ("unknown-runtime-name", _bad("bad-rt-missing", runtime="no-such-runtime")),
        ("unknown-runtime-kind", _bad("bad-rt-kind", kind="BogusRuntime")),
        ("unknown-runtime-apigroup", {**_bad("bad-rt-group"), "spec": {
            "runtimeRef": {"name": TORCH_RT, "kind": "TrainingRuntime", "apiGroup": "example.com"}, "suspend": True}}),
        ("torch-reserved-env-PET_NNODES", _bad("bad-env-nnodes", trainer={"env": [{"name": "PET_NNODES", "value": "2"}]})),
        ("torch-reserved-env-PET_MASTER_ADDR", _bad("bad-env-master", trainer={"env": [{"name": "PET_MASTER_ADDR", "value": "x"}]})),
        ("mpi-reserved-env-OMPI_MCA_orte_keep_fqdn_hostnames",
         _bad("bad-env-mpi", MPI_RT, trainer={"env": [{"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"}]})),
        ("mpi-runLauncherAsNode-without-launcher-numNodes-2", _bad("bad-mpi-nodes", MPI_RT, trainer={"numNodes": 2})),
        ("runtimePatches-unknown-replicated-job", _bad("bad-patch-job", runtimePatches=_patch("example.com/m", "nope"))),
        ("runtimePatches-unknown-container",
         _bad("bad-patch-ctr", runtimePatches=_patch("example.com/m", pod_spec={"containers": [{"name": "nope"}]}))),
        ("runtimePatches-env-on-node-container",
         _bad("bad-patch-env", runtimePatches=_patch("example.com/m", pod_spec={
             "containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]}))),
        ("runtimePatches-manager-not-domain-prefixed", _bad("bad-patch-mgr", runtimePatches=_patch("nodomain"))),
        ("runtimePatches-manager-empty", _bad("bad-patch-mgr-empty", runtimePatches=_patch(""))),
        ("initializer-dataset-without-initializer-job",
         _bad("bad-init", initializer={"dataset": {"storageUri": "hf://tatsu-lab/alpaca"}})),
        ("initializer-bad-storageUri", _bad("bad-init-uri", initializer={"dataset": {"storageUri": "not a uri"}})),
        ("managedBy-unknown", _bad("bad-managed-by", managedBy="example.com/other")),
        ("name-not-dns-label", _bad("Bad_Name")),
        ("name-too-long", _bad("b" * 64)),
        ("torchtune-numNodes-2", _bad("bad-tune-nodes", TUNE_RT, "ClusterTrainingRuntime",
                                      trainer={"command": ["tune", "run"], "numNodes": 2})),
    ]
    for tj, _runtime in rejected_seed_pairs():
        table.append((tj["metadata"]["name"], tj))
    return table


def invalid_table_runtimes() -> list[dict]:
    return invalid_runtimes() + [rt for _tj, rt in rejected_seed_pairs()]


@st.composite
def invalid_generated(draw, index: int) -> tuple[str, dict]:
    """A cheap generated refusal: one of the table's faults with other, valid fields around it."""
    name = f"bad-gen-{index:03d}"
    trainer = {"image": draw(IMAGES)}
    fault = draw(st.sampled_from(["numNodes", "env", "patch-job", "patch-manager", "runtime"]))
    extra: dict = {}
    runtime = TORCH_RT
    if fault == "numNodes":
        trainer["numNodes"] = draw(st.integers(-5, -1))
    elif fault == "env":
        trainer["env"] = [{"name": draw(st.sampled_from(["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK",
                                                          "PET_MASTER_ADDR", "PET_MASTER_PORT"])), "value": "1"}]
    elif fault == "patch-job":
        extra["runtimePatches"] = _patch("example.com/m", draw(st.sampled_from(["launcher", "worker", "Node"])))
    elif fault == "patch-manager":
        extra["runtimePatches"] = _patch(draw(st.sampled_from(["x", "-bad.com/a", "bad_domain.com/x", "UPPER/x"])))
    else:
        runtime = draw(st.sampled_from(["missing", "gen-nope", "torch"]))
    return f"generated-{fault}-{index}", _bad(name, runtime, trainer=trainer, **extra)


def generated_invalid(count: int = 20) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []

    @settings(max_examples=count, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.data())
    def draw(data):
        out.append(data.draw(invalid_generated(len(out))))

    draw()
    return out[:count]


def all_cases() -> list[Case]:
    cases = catalog_cases() + seed_cases() + generated_cases()
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "TrainJob names are unique"
    return copy.deepcopy(cases)
