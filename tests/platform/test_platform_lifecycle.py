"""`pulumi up` of the local stack on the test cluster: converges, isolates tenants, runs a TrainJob, cleans up.

Tests run in file order; the last one destroys the stack.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from functools import partial

import pytest

from trainyard import k8s
from trainyard.cluster.processes import pid_alive

from builders import new_trainjob

pytestmark = pytest.mark.integration

TENANT, OTHER = "team-a", "team-b"


def kubectl_as(cluster, user: str, group: str, *args: str, input_text: str | None = None) -> subprocess.CompletedProcess:
    from trainyard.cluster.local import ClusterPaths
    from trainyard.toolchain.versions import binary

    argv = [str(binary("kubectl")), "--kubeconfig", str(ClusterPaths.for_name(cluster.name).kubeconfig),
            f"--as={user}", f"--as-group={group}", *args]
    return subprocess.run(argv, input=input_text, capture_output=True, text=True)


def test_second_preview_shows_no_changes(platform):
    result = platform.preview()
    changes = {op: n for op, n in result.change_summary.items() if op != "same" and n}
    assert changes == {}, f"a preview right after up must be empty, got {changes}: {result.changed[:40]}"


def test_policy_pack_passes_on_the_deployed_program(platform):
    """`pulumi preview --policy-pack platform/policy_pack`: no wildcard RBAC, every tenant fully covered."""
    from trainyard.paths import repo_root
    from trainyard.pulumi_env import pulumi_binary

    run = subprocess.run([str(pulumi_binary()), "preview", "--non-interactive", "--stack", "it", "--policy-pack",
                          str(repo_root() / "platform" / "policy_pack")], cwd=platform.workdir, env=platform.env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "trainyard-platform" in run.stdout
    assert "mandatory" not in run.stdout.lower(), "no mandatory policy is violated"


def test_every_tenant_got_namespace_quota_queue_rbac_and_runtimes(platform, cluster):
    for tenant in platform.values["config"]["trainyard:tenants"]:
        ns = tenant["namespace"]
        namespace = cluster.core.read_namespace(ns)
        assert namespace.metadata.labels.get("trainyard.dev/queue") == tenant["queue"]["name"]
        quotas = cluster.core.list_namespaced_resource_quota(ns).items
        assert any("requests.nvidia.com/gpu" in (q.spec.hard or {}) for q in quotas)
        queue = cluster.custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues",
                                                         tenant["queue"]["name"])
        assert queue["spec"]["weight"] == tenant["queue"]["weight"]
        assert queue["spec"]["capability"]["nvidia.com/gpu"] in (str(tenant["queue"]["capability"]["nvidia.com/gpu"]),
                                                                  tenant["queue"]["capability"]["nvidia.com/gpu"])
        cluster.wait(lambda: (cluster.custom.get_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues", tenant["queue"]["name"]).get("status") or {}).get("state")
            == "Open", what=f"queue {tenant['queue']['name']} open")
        runtimes = cluster.custom.list_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", ns,
                                                                "trainingruntimes")["items"]
        assert runtimes, f"{ns} has the runtimes of its pinned release"
        assert {r["metadata"]["labels"].get("trainyard.dev/catalog-version") for r in runtimes} == {tenant["catalogVersion"]}


_trainjob = partial(new_trainjob, runtime_name="torch-distributed-volcano", kind="TrainingRuntime", nodes=2,
                    per_node={"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "8"},
                              "limits": {"nvidia.com/gpu": "8"}})
"""A tenant's two-node TrainJob on the catalog's namespaced runtime."""


def _queue_patch(queue: str) -> list[dict]:
    return [{"manager": "example.com/user", "trainingRuntimeSpec": {
        "template": {"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": queue}}}}}]


def test_tenant_user_runs_a_trainjob_to_completion_in_its_queue(platform, cluster):
    name = f"e2e-{uuid.uuid4().hex[:5]}"
    created = kubectl_as(cluster, "alice", f"{TENANT}-users", "create", "-f", "-",
                         input_text=json.dumps(_trainjob(name, namespace=TENANT)))
    assert created.returncode == 0, created.stderr
    pg = cluster.wait(lambda: _get(cluster, "scheduling.volcano.sh", "v1beta1", TENANT, "podgroups", name),
                      what="the PodGroup")
    assert pg["spec"]["queue"] == TENANT
    assert cluster.wait(lambda: _get(cluster, "jobset.x-k8s.io", "v1alpha2", TENANT, "jobsets", name), what="JobSet")

    _wait_complete(cluster, name)
    pods = cluster.core.list_namespaced_pod(TENANT, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    assert len(pods) == 2
    for pod in pods:
        node = cluster.core.read_node(pod.spec.node_name)
        assert node.metadata.labels["nvidia.com/gpu.present"] == "true"


def test_data_scientist_trains_with_the_kubeflow_sdk(platform, cluster, caplog):
    """The pinned Kubeflow SDK, as a tenant user (client certificate, no admin rights), end to end."""
    from kubeflow.trainer import BuiltinTrainer, CustomTrainer, KubernetesBackendConfig, LoraConfig, TorchTuneConfig, TrainerClient

    from trainyard.cluster.local import user_kubeconfig

    kubeconfig = user_kubeconfig(cluster.name, "alice", (f"{TENANT}-users",))
    with caplog.at_level("WARNING"):
        client = TrainerClient(KubernetesBackendConfig(namespace=TENANT, config_file=str(kubeconfig)))
    assert "version info is not available" not in caplog.text, "kubeflow-trainer-public must be readable"

    runtimes = {r.name: r for r in client.list_runtimes()}
    assert {"torch-distributed-volcano", "torchtune-llama3.2-1b"} <= set(runtimes)
    assert runtimes["torch-distributed-volcano"].trainer.framework == "torch"

    def train():
        print("training")

    name = client.train(runtime=runtimes["torch-distributed-volcano"],
                        trainer=CustomTrainer(func=train, num_nodes=2, resources_per_node={"gpu": 8}))
    try:
        job = client.wait_for_job_status(name, status={"Complete"}, timeout=180, polling_interval=1)
    except TimeoutError as err:
        raise AssertionError(f"{err}\n{cluster.scheduling_picture(TENANT)}") from err
    assert job.status == "Complete" and job.num_nodes == 2
    assert sorted(step.name for step in job.steps) == ["node-0", "node-1"]
    tj = _get(cluster, "trainer.kubeflow.org", "v1alpha1", TENANT, "trainjobs", name)
    pg = _get(cluster, "scheduling.volcano.sh", "v1beta1", TENANT, "podgroups", name)
    assert pg["spec"]["queue"] == TENANT and pg["spec"]["minMember"] == 2
    assert tj["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] in (8, "8")
    client.delete_job(name)
    cluster.wait(lambda: _get(cluster, "trainer.kubeflow.org", "v1alpha1", TENANT, "trainjobs", name) is None,
                 what="the TrainJob deleted")

    # LLM fine-tuning with the SDK's BuiltinTrainer: [tune, run] + config args, rewritten by the controller
    tune = client.train(runtime=runtimes["torchtune-llama3.2-1b"], trainer=BuiltinTrainer(
        config=TorchTuneConfig(epochs=1, peft_config=LoraConfig(lora_attn_modules=["q_proj", "v_proj"]))))
    js = cluster.wait(lambda: _get(cluster, "jobset.x-k8s.io", "v1alpha2", TENANT, "jobsets", tune), what="the JobSet")
    node = k8s.find_job(js["spec"], "node")["template"]["spec"]["template"]["spec"]["containers"][0]
    assert node["command"][:7] == ["tune", "run", f"--rdzv_endpoint={tune}-node-0-0.{tune}:29500",
                                   "lora_finetune_distributed", "--config", "llama3_2/1B_lora", "output_dir=/workspace/output"]
    assert "epochs=1" in node["args"] and "model.lora_attn_modules=[q_proj,v_proj]" in node["args"]
    client.delete_job(tune)


def test_tenant_user_trainjob_on_a_catalog_cluster_runtime_gets_its_queue_and_the_granted_class_it_selects(
        platform, cluster):
    """Issue 10: a ClusterTrainingRuntime names no queue (the PodGroup had none, the queue guard refused it and
    the TrainJob hung); the controller now fills the namespace's queue, and the label selects a granted class."""
    name = f"ctr-{uuid.uuid4().hex[:5]}"
    tj = _trainjob(name, namespace=TENANT)
    tj["spec"]["runtimeRef"] = {"name": "torch-distributed-volcano", "kind": "ClusterTrainingRuntime"}
    tj["metadata"]["labels"] = {"trainyard.dev/priority-class": "training-high"}
    created = kubectl_as(cluster, "alice", f"{TENANT}-users", "create", "-f", "-", input_text=json.dumps(tj))
    assert created.returncode == 0, created.stderr
    pg = cluster.wait(lambda: _get(cluster, "scheduling.volcano.sh", "v1beta1", TENANT, "podgroups", name),
                      what="the PodGroup")
    assert pg["spec"]["queue"] == TENANT and pg["spec"]["priorityClassName"] == "training-high"

    _wait_complete(cluster, name)
    pods = cluster.core.list_namespaced_pod(TENANT, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    assert {p.spec.priority_class_name for p in pods} == {"training-high"} and {p.spec.priority for p in pods} == {10000}

    tj["metadata"] = {"name": f"{name}-b", "namespace": TENANT, "labels": {"trainyard.dev/priority-class": "team-b-default"}}
    refused = kubectl_as(cluster, "alice", f"{TENANT}-users", "create", "-f", "-", input_text=json.dumps(tj))
    assert refused.returncode != 0
    assert ('metadata.labels[trainyard.dev/priority-class]: Unsupported value: "team-b-default": supported values: '
            '"training-high", "team-a-default"') in refused.stderr


def test_tenant_user_is_confined_to_its_namespace_and_queue(platform, cluster):
    user, group = "alice", f"{TENANT}-users"
    other_ns = kubectl_as(cluster, user, group, "create", "-f", "-",
                          input_text=json.dumps(_trainjob("intruder", namespace=OTHER)))
    assert other_ns.returncode != 0 and "forbidden" in other_ns.stderr.lower()
    other_queue = kubectl_as(cluster, user, group, "create", "-f", "-",
                             input_text=json.dumps(_trainjob("queue-jumper", namespace=TENANT,
                                                             runtimePatches=_queue_patch(OTHER))))
    assert other_queue.returncode != 0, "naming another tenant's queue is refused"
    assert "queue" in other_queue.stderr.lower()
    for args in (["patch", "trainingruntime", "torch-distributed-volcano", "-n", TENANT, "--type=merge", "-p",
                  '{"metadata":{"labels":{"x":"y"}}}'],
                 ["patch", "queue", TENANT, "--type=merge", "-p", '{"spec":{"weight":100}}'],
                 ["delete", "resourcequota", "--all", "-n", TENANT]):
        denied = kubectl_as(cluster, user, group, *args)
        assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), args


def test_removing_a_tenant_removes_its_namespace_objects_and_queue(platform, cluster):
    removed = [t for t in platform.values["config"]["trainyard:tenants"] if t["name"] == OTHER]
    platform.values["config"]["trainyard:tenants"] = [t for t in platform.values["config"]["trainyard:tenants"]
                                                      if t["name"] != OTHER]
    platform.write_config()
    try:
        platform.up()
        assert _get(cluster, "scheduling.volcano.sh", "v1beta1", None, "queues", OTHER) is None
        cluster.wait(lambda: _namespace_gone(cluster, OTHER), timeout=120, what=f"namespace {OTHER} deleted")
    finally:
        platform.values["config"]["trainyard:tenants"] += removed
        platform.write_config()


def test_crashed_up_converges_when_run_again(platform, cluster, capsys):
    """Crash an up (SIGKILL to pulumi and its plugins, as a reboot would) while it recreates a tenant: the
    local backend saves state once per update, so the record of what it created is lost. After the
    `pulumi cancel` the lock message asks for, the next up adopts what it finds: done, nothing left to change."""
    import signal
    import time

    from trainyard.pulumi_env import pulumi_binary

    assert platform.env["PULUMI_SKIP_CHECKPOINTS"] == "true", "the local stack's backend, as `trainyard up` runs it"
    proc = subprocess.Popen([str(pulumi_binary()), "up", "--yes", "--skip-preview", "--non-interactive",
                             "--stack", "it"], cwd=platform.workdir, env=platform.env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cluster.wait(lambda: not _namespace_gone(cluster, OTHER) or proc.poll() is not None, timeout=180,
                 interval=0.2, what="the up to start recreating the removed tenant")
    crashed = proc.poll() is None
    tree = _process_tree(proc.pid)  # pulumi, its language host, the program and the provider
    if crashed:
        for pid in tree:
            os.kill(pid, signal.SIGKILL)
    output, _ = proc.communicate(timeout=300)
    cluster.wait(lambda: not any(pid_alive(pid) for pid in tree), timeout=10, what="the crashed processes gone")
    subprocess.run([str(pulumi_binary()), "cancel", "--yes", "--stack", "it"], cwd=platform.workdir, env=platform.env,
                   capture_output=True, timeout=60)
    started = time.monotonic()
    platform.up()
    again = time.monotonic() - started
    result = platform.preview()
    assert {op: n for op, n in result.change_summary.items() if op != "same" and n} == {}, output[-2000:]
    assert _get(cluster, "scheduling.volcano.sh", "v1beta1", None, "queues", OTHER) is not None
    with capsys.disabled():
        print(f"\n[reliability] pulumi up {'crashed (SIGKILL) mid-way' if crashed else 'finished before the crash'}:"
              f" after `pulumi cancel`, the next up + refresh converged in {again:.0f} s, preview then clean")


def test_destroy_leaves_nothing_trainyard_created(platform, cluster):
    platform.destroy()
    for tenant in platform.values["config"]["trainyard:tenants"]:
        cluster.wait(lambda t=tenant: _namespace_gone(cluster, t["namespace"]), timeout=120,
                     what=f"namespace {tenant['namespace']} deleted")
        assert _get(cluster, "scheduling.volcano.sh", "v1beta1", None, "queues", tenant["queue"]["name"]) is None
    leftovers = cluster.kubectl("get", "clustertrainingruntimes", "-l", "trainyard.dev/catalog-version", "-o", "name")
    assert leftovers.strip() == ""
    crds = cluster.kubectl("get", "crd", "-o", "name")
    assert "trainjobs.trainer.kubeflow.org" in crds, "CRDs are retained by default so user TrainJobs survive"


def _process_tree(root: int) -> list[int]:
    """`root` and every process descended from it (from /proc: plugins start in their own process groups)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def _wait_complete(cluster, name: str) -> None:
    """Wait for the tenant TrainJob's Complete condition; on timeout say who holds the GPUs and why it waits."""
    def complete():
        status = (_get(cluster, "trainer.kubeflow.org", "v1alpha1", TENANT, "trainjobs", name) or {}).get("status") or {}
        return any(c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions", []))

    try:
        cluster.wait(complete, timeout=180, what=f"TrainJob {name} to complete")
    except AssertionError as err:
        raise AssertionError(f"{err}\n{cluster.scheduling_picture(TENANT)}") from err


def _get(cluster, group, version, namespace, plural, name):
    return cluster.get_object(group, version, plural, name, namespace)


def _namespace_gone(cluster, name: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        cluster.core.read_namespace(name)
    except ApiException as exc:
        return exc.status == 404
    return False
