"""trainyard's TrainJob controller against the real API server, JobSet controller and Volcano."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

from trainyard import k8s
from trainyard.cluster import local
from trainyard.cluster.processes import ProcessTable

from builders import EIGHT_GPUS, new_trainjob, torch_runtime
from waiting import retrying

pytestmark = pytest.mark.integration

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"


def get(cluster, kind_plural: str, name: str, namespace: str | None = None, group=GROUP, version=VERSION):
    return cluster.get_object(group, version, kind_plural, name, namespace)


def jobset(cluster, name, ns):
    return get(cluster, "jobsets", name, ns, "jobset.x-k8s.io", "v1alpha2")


def podgroup(cluster, name, ns):
    return get(cluster, "podgroups", name, ns, "scheduling.volcano.sh", "v1beta1")


def condition(obj: dict | None, kind: str) -> dict | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return cond
    return None


def create(cluster, obj: dict) -> None:
    cluster.kubectl("create", "-f", "-", input_text=json.dumps(obj))


@pytest.fixture
def runtime(cluster):
    name = f"torch-{uuid.uuid4().hex[:6]}"
    create(cluster, torch_runtime(name, gpus=8, queue="default"))
    yield name
    cluster.kubectl("delete", "clustertrainingruntime", name, "--wait=false")


def test_trainjob_builds_snapshot_jobset_and_podgroup_then_completes(cluster, runtime):
    ns = cluster.namespace("tj")
    create(cluster, new_trainjob("mnist", runtime, namespace=ns, suspend=False, nodes=2, per_node=EIGHT_GPUS))
    tj = get(cluster, "trainjobs", "mnist", ns)
    uid = tj["metadata"]["uid"]

    js = cluster.wait(lambda: jobset(cluster, "mnist", ns), what="the JobSet")
    pg = cluster.wait(lambda: podgroup(cluster, "mnist", ns), what="the Volcano PodGroup")
    snap = cluster.core.read_namespaced_config_map("mnist-runtime-snapshot", ns)
    for obj_refs in (js["metadata"]["ownerReferences"], pg["metadata"]["ownerReferences"],
                     [r.to_dict() for r in snap.metadata.owner_references]):
        (ref,) = obj_refs
        assert ref["uid"] == uid and ref["kind"] == "TrainJob" and ref["controller"] is True
    assert pg["spec"]["minMember"] == 2
    assert pg["spec"]["queue"] == "default"
    assert pg["spec"]["minResources"]["nvidia.com/gpu"] in ("16", 16)
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2
    assert yaml.safe_load(snap.data["runtime"])["metadata"]["name"] == runtime

    done = cluster.wait(lambda: (c := condition(get(cluster, "trainjobs", "mnist", ns), "Complete"))
                        and c["status"] == "True" and c, timeout=120, what="TrainJob Complete")
    assert done["reason"]
    pods = cluster.core.list_namespaced_pod(ns).items
    assert len(pods) == 2 and all(p.spec.node_name for p in pods), "gang of two bound to GPU nodes"
    assert all(p.metadata.annotations.get("scheduling.k8s.io/group-name") == "mnist" for p in pods)
    status = get(cluster, "trainjobs", "mnist", ns)["status"]
    assert status["jobsStatus"][0]["name"] == "node"


def test_suspend_then_resume(cluster, runtime):
    ns = cluster.namespace("susp")
    create(cluster, new_trainjob("paused", runtime, namespace=ns, suspend=True, nodes=2, per_node=EIGHT_GPUS))
    cluster.wait(lambda: (c := condition(get(cluster, "trainjobs", "paused", ns), "Suspended"))
                 and c["status"] == "True", what="Suspended=True")
    js = cluster.wait(lambda: jobset(cluster, "paused", ns), what="the suspended JobSet")
    assert js["spec"]["suspend"] is True
    cluster.wait(lambda: _jobs_suspended(cluster, ns), what="the Job controller to mark the JobSet's Jobs Suspended")
    assert cluster.core.list_namespaced_pod(ns).items == [], "a suspended TrainJob runs no pods"

    cluster.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, "trainjobs", "paused", {"spec": {"suspend": False}})
    resumed = cluster.wait(lambda: (c := condition(get(cluster, "trainjobs", "paused", ns), "Suspended"))
                           and c["status"] == "False" and c, what="Suspended=False")
    assert resumed["reason"] == "Resumed"
    cluster.wait(lambda: (c := condition(get(cluster, "trainjobs", "paused", ns), "Complete")) and c["status"] == "True",
                 timeout=120, what="the resumed TrainJob to complete")


def test_children_edited_by_hand_are_put_back(cluster, runtime):
    """The controller skips applies that would change nothing (controller/apply_record.py); an edit to a
    child's spec or to metadata it applied must still be undone, as upstream's apply-every-time does."""
    ns = cluster.namespace("drift")
    create(cluster, new_trainjob("drifty", runtime, namespace=ns, suspend=True, nodes=2, per_node=EIGHT_GPUS))
    js = cluster.wait(lambda: jobset(cluster, "drifty", ns), what="the JobSet")
    cluster.wait(lambda: podgroup(cluster, "drifty", ns), what="the PodGroup")
    queue_annotation = k8s.VOLCANO_QUEUE_ANNOTATION
    assert js["metadata"]["annotations"][queue_annotation] == "default"
    time.sleep(3)  # let the children's own events settle: later reconciles skip their applies

    cluster.custom.patch_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", "drifty",
                                                  {"spec": {"minMember": 1}})
    cluster.wait(lambda: podgroup(cluster, "drifty", ns)["spec"]["minMember"] == 2, timeout=30,
                 what="the PodGroup's minMember put back to 2")
    escaped = queue_annotation.replace("~", "~0").replace("/", "~1")
    cluster.kubectl("patch", "jobset", "drifty", "-n", ns, "--type=json",
                    "-p", json.dumps([{"op": "remove", "path": f"/metadata/annotations/{escaped}"}]))
    cluster.wait(lambda: (jobset(cluster, "drifty", ns)["metadata"].get("annotations") or {}).get(queue_annotation)
                 == "default", timeout=30, what="the JobSet's queue annotation put back")


def test_runtime_edit_leaves_an_existing_trainjob_unchanged(cluster, runtime):
    ns = cluster.namespace("snap")
    create(cluster, new_trainjob("pinned", runtime, namespace=ns, suspend=True, nodes=2, per_node=EIGHT_GPUS))
    before = cluster.wait(lambda: jobset(cluster, "pinned", ns), what="the JobSet")
    image = before["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["image"]
    cluster.custom.patch_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", runtime, {"spec": {"template": {
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {"containers": [
            {"name": "node", "image": "example.com/changed:1"}]}}}}}]}}}})
    # resume: the JobSet is re-applied (the only time it is), still from the snapshot
    cluster.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, "trainjobs", "pinned", {"spec": {"suspend": False}})
    cluster.wait(lambda: (c := condition(get(cluster, "trainjobs", "pinned", ns), "Suspended")) and c["status"] == "False",
                 what="resume")
    after = jobset(cluster, "pinned", ns)
    assert after["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["image"] == image


def test_controller_killed_while_100_trainjobs_are_created_converges(cluster, runtime):
    """SIGKILL the controller mid-burst, restart it a few seconds later; creations go on meanwhile.

    While it is down its admission webhook is down too (failurePolicy Fail), so the client retries
    refused creations, as a user's tooling would.
    """
    ns = cluster.namespace("crash")
    table = ProcessTable(local.ClusterPaths.for_name(cluster.name).root)
    names = [f"job-{i:03d}" for i in range(100)]
    restarter = None
    for index, name in enumerate(names):
        if index == 30:
            table.kill("trainjob-controller")
            restarter = threading.Timer(3.0, table.restart, args=("trainjob-controller",))
            restarter.start()
        _create_retrying(cluster, new_trainjob(name, runtime, namespace=ns, suspend=True, nodes=1, per_node=EIGHT_GPUS))
    restarter.join()

    def converged():
        jobsets = cluster.custom.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets")["items"]
        pgs = cluster.custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]
        snaps = [c for c in cluster.core.list_namespaced_config_map(ns).items if c.metadata.name.endswith("-runtime-snapshot")]
        return (len(jobsets), len(pgs), len(snaps)) == (100, 100, 100) and (jobsets, pgs, snaps)

    jobsets, pgs, snaps = cluster.wait(converged, timeout=300, interval=2, what="100 JobSets, PodGroups and snapshots")
    tjs = {t["metadata"]["name"]: t["metadata"]["uid"] for t in
           cluster.custom.list_namespaced_custom_object(GROUP, VERSION, ns, "trainjobs")["items"]}
    for kind, items in (("JobSet", jobsets), ("PodGroup", pgs)):
        assert sorted(i["metadata"]["name"] for i in items) == names, f"one {kind} per TrainJob"
        for item in items:
            (ref,) = item["metadata"]["ownerReferences"]
            assert tjs[ref["name"]] == ref["uid"], f"{kind} {item['metadata']['name']} is not orphaned"
    for snap in snaps:
        (ref,) = snap.metadata.owner_references
        assert tjs[ref.name] == ref.uid


def _jobs_suspended(cluster, ns: str) -> bool:
    """Every Job in `ns` carries the Job controller's Suspended=True condition: it has synced them, and a Job it
    synced as suspended gets no pods."""
    jobs = cluster.kubectl("get", "jobs", "-n", ns, "-o", "json")
    items = json.loads(jobs)["items"]
    return bool(items) and all(any(c.get("type") == "Suspended" and c.get("status") == "True"
                                   for c in (job.get("status") or {}).get("conditions") or []) for job in items)


def _create_retrying(cluster, obj: dict, timeout: float = 60) -> None:
    def webhook_away(exc: Exception) -> bool:
        return isinstance(exc, local.ClusterError) and "connection refused" in str(exc)

    retrying(lambda: create(cluster, obj), webhook_away, timeout, f"creating {obj['metadata']['name']}", 0.5)


def _seed(name: str) -> dict:
    return yaml.safe_load((SEEDS / name).read_text())


@pytest.mark.parametrize("pair", yaml.safe_load((SEEDS / "index.yaml").read_text())["pairs"],
                         ids=lambda p: p["trainjob"].removesuffix(".yaml"))
def test_seed_trainjob_reconciles(cluster, pair):
    tj = _seed(pair["trainjob"])
    ns = tj["metadata"].get("namespace") or "default"
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for extra in pair.get("cluster", []):
        cluster.apply(_seed(extra))
    runtime = _seed(pair["runtime"])
    for queue in _queues(runtime, tj):  # the seeds name queues they never create
        cluster.apply({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": queue},
                       "spec": {"weight": 1}})
    for pc in _priority_classes(runtime):
        cluster.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": pc},
                       "value": 1000})
    # the seeds reuse catalog names (torch-distributed, ...): give this copy its own name
    suffix = uuid.uuid4().hex[:4]
    runtime["metadata"]["name"] = f"{runtime['metadata']['name']}-{suffix}"
    tj["spec"]["runtimeRef"]["name"] = runtime["metadata"]["name"]
    # --validate=warn: seed 001 invents networkTopology.topologyKey/networkPolicy; the API server warns and prunes them
    cluster.kubectl("apply", "--validate=warn", "-f", "-", input_text=json.dumps(runtime))
    tj["metadata"]["name"] = f"{tj['metadata']['name']}-{suffix}"
    if pair.get("rejected"):
        with pytest.raises(local.ClusterError) as refused:
            cluster.apply(tj)
        for message in pair["rejected"]:
            assert message in str(refused.value)
        return
    cluster.apply(tj)
    name = tj["metadata"]["name"]
    try:
        js = cluster.wait(lambda: jobset(cluster, name, ns), timeout=60, what=f"the JobSet of seed {pair['trainjob']}")
        assert js["metadata"]["ownerReferences"][0]["name"] == name
        assert js["metadata"]["ownerReferences"][0]["controller"] is True
    finally:  # its gang must not hold GPUs for the tests after it
        cluster.kubectl("delete", "trainjob", name, "-n", ns, "--wait=false")


def _queues(runtime: dict, tj: dict) -> set[str]:
    key = "scheduling.volcano.sh/queue-name"
    found = {((runtime["spec"].get("template") or {}).get("metadata") or {}).get("annotations", {}).get(key),
             (tj["spec"].get("annotations") or {}).get(key)}
    return {q for q in found if q}


def _priority_classes(runtime: dict) -> set[str]:
    found = set()
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pc = job["template"]["spec"]["template"]["spec"].get("priorityClassName")
        if pc:
            found.add(pc)
    return found


def _catalog_runtime_in(namespace: str, name: str) -> dict:
    """The current catalog release's runtime `name`, as a TrainingRuntime of `namespace` (the name stays:
    torchtune derives the model from it)."""
    from trainyard.runtimes.publish import cluster_runtimes_of
    from trainyard.runtimes.store import load_catalog

    catalog = load_catalog()
    (obj,) = cluster_runtimes_of(catalog, catalog.current.version, only=name)
    obj["kind"] = "TrainingRuntime"
    obj["metadata"]["namespace"] = namespace
    return obj


def test_torchtune_trainjob_gets_the_rewritten_tune_command(cluster):
    """The SDK's BuiltinTrainer(TorchTuneConfig) writes command [tune, run] plus key=value args."""
    ns = cluster.namespace("tune")
    create(cluster, _catalog_runtime_in(ns, "torchtune-llama3.2-1b"))
    lora = "model.lora_attn_modules=['q_proj','v_proj']"
    tj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainJob", "metadata": {"name": "ft", "namespace": ns},
          "spec": {"runtimeRef": {"name": "torchtune-llama3.2-1b", "kind": "TrainingRuntime"},
                   "trainer": {"command": ["tune", "run"], "args": ["epochs=1", lora]}}}
    create(cluster, tj)
    js = cluster.wait(lambda: jobset(cluster, "ft", ns), what="the JobSet")
    node_job = k8s.find_job(js["spec"], "node")
    (node,) = node_job["template"]["spec"]["template"]["spec"]["containers"]
    assert node["command"] == ["tune", "run", "--rdzv_endpoint=ft-node-0-0.ft:29500", "lora_finetune_distributed",
                               "--config", "llama3_2/1B_lora", "output_dir=/workspace/output",
                               "tokenizer.path=/workspace/model/original/tokenizer.model",
                               "checkpointer.checkpoint_dir=/workspace/model"]
    assert node["args"] == ["epochs=1", lora]
    assert "PET_MASTER_ADDR" not in {e["name"] for e in node["env"]}
    assert get(cluster, "trainjobs", "ft", ns)["spec"]["trainer"]["command"] == ["tune", "run"]

    refused = dict(tj, metadata={"name": "ft2", "namespace": ns})
    refused["spec"] = dict(tj["spec"], trainer={"command": ["tune", "run"], "numNodes": 2, "args": ["output_dir=/tmp"]})
    with pytest.raises(local.ClusterError) as denied:
        create(cluster, refused)
    assert "spec.trainer.numNodes: Invalid value: 2: must be 1 for llama3_2/1B model" in str(denied.value)
    assert ('spec.trainer.args[0]: Invalid value: "output_dir=/tmp": must not set immutable config "output_dir" '
            "in trainer args; it is managed by the runtime") in str(denied.value)



def _coscheduling_podgroup_crd() -> dict:
    """A minimal stand-in schema for scheduler-plugins' PodGroup kind (test fixture only: the local cluster
    runs Volcano, and only the object's identity matters here)."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
            "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
                     "names": {"kind": "PodGroup", "plural": "podgroups", "singular": "podgroup", "listKind": "PodGroupList"},
                     "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_a_running_trainjob_leaves_its_coscheduling_podgroup_alone(cluster):
    """Like the Volcano PodGroup, a coscheduling PodGroup is only (re)applied while the TrainJob is suspended."""
    cluster.apply(_coscheduling_podgroup_crd())
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/podgroups.scheduling.x-k8s.io")
    ns = cluster.namespace("cosched")
    rt = torch_runtime(f"cosched-{uuid.uuid4().hex[:6]}", gpus=8, queue="default")
    rt["kind"], rt["metadata"]["namespace"] = "TrainingRuntime", ns
    rt["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 120}}
    create(cluster, rt)
    tj = new_trainjob("gang", rt["metadata"]["name"], namespace=ns, suspend=True, nodes=2, per_node=EIGHT_GPUS)
    tj["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    create(cluster, tj)

    def cosched_pg():
        return get(cluster, "podgroups", "gang", ns, "scheduling.x-k8s.io", "v1alpha1")

    pg = cluster.wait(cosched_pg, what="the coscheduling PodGroup")
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["scheduleTimeoutSeconds"] == 120
    cluster.kubectl("patch", "trainjob", "gang", "-n", ns, "--type=merge", "-p", '{"spec":{"suspend":false}}')
    cluster.wait(lambda: jobset(cluster, "gang", ns)["spec"]["suspend"] is False, what="the JobSet resumed")
    # someone else (an operator) edits the running gang; later reconciles must not force it back
    cluster.kubectl("patch", "podgroups.scheduling.x-k8s.io", "gang", "-n", ns, "--type=merge", "-p",
                    '{"spec":{"scheduleTimeoutSeconds":300}}')
    # update events: each one more reconcile, which must leave the running gang's PodGroup alone
    cluster.reconciled_after(lambda: cluster.kubectl("label", "trainjob", "gang", "-n", ns, "touched=yes"))
    cluster.reconciled_after(lambda: cluster.kubectl("annotate", "trainjob", "gang", "-n", ns, "touched=again"))
    assert cosched_pg()["spec"]["scheduleTimeoutSeconds"] == 300


def test_flux_trainjob_gets_its_scripts_curve_and_wrapped_command(cluster):
    ns = cluster.namespace("flux")
    rt = torch_runtime(f"flux-{uuid.uuid4().hex[:6]}", gpus=8, queue="default",
                       image="ghcr.io/converged-computing/lammps:latest-tag")
    rt["kind"], rt["metadata"]["namespace"] = "TrainingRuntime", ns
    rt["metadata"]["labels"]["trainer.kubeflow.org/framework"] = "flux"
    rt["spec"]["mlPolicy"] = {"numNodes": 2, "flux": {"numProcPerNode": 4}}
    create(cluster, rt)
    tj = new_trainjob("lmp", rt["metadata"]["name"], namespace=ns, suspend=False, nodes=2, per_node=EIGHT_GPUS)
    tj["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    tj["spec"]["trainer"]["command"] = ["lmp", "-in", "in.reaxff.hns"]
    create(cluster, tj)
    js = cluster.wait(lambda: jobset(cluster, "lmp", ns), what="the JobSet")
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", "lmp -in in.reaxff.hns"]
    assert [c["name"] for c in pod["initContainers"]] == ["flux-installer"]
    uid = get(cluster, "trainjobs", "lmp", ns)["metadata"]["uid"]
    scripts = cluster.core.read_namespaced_config_map("lmp-flux-entrypoint", ns)
    assert 'flags="-N 2 -n 8 -g 8  "' in scripts.data["entrypoint.sh"] and "lmp-node-0-[0-1]" in scripts.data["init.sh"]
    curve = cluster.core.read_namespaced_secret("lmp-flux-curve", ns)
    assert curve.metadata.owner_references[0].uid == uid and "curve.cert" in curve.data
