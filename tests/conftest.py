"""Session-scoped local cluster (kwok provider) shared by integration and smoke tests.

Tools that are missing are built, never skipped: the toolchain is part of the product.
The test cluster uses its own name and ports so it coexists with a `make up` cluster.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest
import yaml

from trainyard.cluster import local
from trainyard.cluster.spec import ClusterSpec
from trainyard.toolchain.build import ensure_built
from waiting import wait_for

# Two developers (or a developer and CI) can run suites side by side by choosing another name and base.
# Timed pods: a pod annotated `pod-complete.stage.kwok.x-k8s.io/delay` runs that long (the usage tests); others
# complete at once, as kwok's default Stages do. The controller's budget loop runs every 5 s and a TrainJob holding GPUs without progress for
# 20 s is flagged stalled (the usage tests).
TEST_CLUSTER = ClusterSpec(name=os.environ.get("TRAINYARD_TEST_CLUSTER", "trainyard-test"), nodes=4, gpus_per_node=8,
                           racks=2, port_base=int(os.environ.get("TRAINYARD_TEST_PORT_BASE", "26600")), timed_pods=True,
                           budgets_every=5.0, stalled_after=20.0, gang_start_timeout=10.0)


class Cluster:
    """Handle on the running test cluster: kubectl and the Python client, both on its kubeconfig."""

    def __init__(self, spec: ClusterSpec):
        from kubernetes import client, config

        self.spec = spec
        self.name = spec.name
        self.kubeconfig = str(local.ClusterPaths.for_name(spec.name).kubeconfig)
        self.api_client = config.new_client_from_config(config_file=self.kubeconfig)
        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self.created_namespaces: list[str] = []

    def kubectl(self, *args: str, input_text: str | None = None) -> str:
        return local.kubectl(self.name, *args, input_text=input_text)

    def apply(self, *objects: dict) -> None:
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input_text=yaml.safe_dump_all(list(objects)))

    def get_object(self, group: str, version: str, plural: str, name: str, namespace: str | None = None) -> dict | None:
        """A custom object, or None when it does not exist."""
        from kubernetes.client.exceptions import ApiException

        try:
            if namespace:
                return self.custom.get_namespaced_custom_object(group, version, namespace, plural, name)
            return self.custom.get_cluster_custom_object(group, version, plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def scheduling_picture(self, namespace: str) -> str:
        """Who holds the GPUs and why `namespace`'s pods wait: appended to timeouts so a CI log explains itself."""
        lines = []
        for pod in self.core.list_pod_for_all_namespaces().items:
            gpus = sum(int((c.resources.requests or {}).get("nvidia.com/gpu", 0)) for c in pod.spec.containers)
            if pod.status.phase in ("Succeeded", "Failed") or not (gpus or pod.metadata.namespace == namespace):
                continue
            waiting = [f"{c.reason}: {c.message}" for c in (pod.status.conditions or []) if c.status != "True" and c.reason]
            lines.append(f"pod {pod.metadata.namespace}/{pod.metadata.name} {pod.status.phase} node={pod.spec.node_name} "
                         f"gpus={gpus} deleting={bool(pod.metadata.deletion_timestamp)} {'; '.join(waiting)}")
        for pg in self.custom.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "podgroups")["items"]:
            status = pg.get("status") or {}
            if status.get("phase") == "Completed":
                continue
            reasons = "; ".join(f"{c.get('type')}={c.get('reason')}: {c.get('message')}" for c in status.get("conditions", []))
            lines.append(f"podgroup {pg['metadata']['namespace']}/{pg['metadata']['name']} queue={pg['spec'].get('queue')} "
                         f"phase={status.get('phase')} running={status.get('running')} {reasons}")
        for queue in self.custom.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues")["items"]:
            lines.append(f"queue {queue['metadata']['name']} {json.dumps(queue.get('status') or {}, sort_keys=True)}")
        return "\n".join(lines)

    def namespace(self, prefix: str = "t") -> str:
        """A fresh namespace, deleted after the test so its gangs stop holding queue resources."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.kubectl("create", "namespace", name)
        self.created_namespaces.append(name)
        return name

    # What a TrainJob leaves in its namespace, parents first: deleting a parent's collection before its
    # children's keeps its controller from recreating them.
    TRAINJOB_OBJECTS = (("trainer.kubeflow.org", "v1alpha1", "trainjobs"), ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
                        ("scheduling.volcano.sh", "v1beta1", "podgroups"), ("batch", "v1", "jobs"))

    def delete_created_namespaces(self, wait: bool = False) -> None:
        """`wait`: the TrainJobs' objects first and until gone, then the namespace until gone. A namespace
        deleted while the API server restarts (reliability tests) can be finalized with its TrainJobs and
        PodGroups left in etcd, invisible and still holding Volcano queue capacity for every later test.
        Each kind goes in one collection delete: the garbage collector, one owner lookup and one delete per
        object, took 4 minutes to remove a 500-TrainJob burst's JobSets, PodGroups and Jobs."""
        while self.created_namespaces:
            name = self.created_namespaces.pop()
            if wait:
                self.wait(lambda: self._delete_trainjob_objects(name) == 0, timeout=600, interval=1,
                          what=f"the TrainJobs of {name} and their objects deleted")
            self.kubectl("delete", "namespace", name, f"--wait={'true' if wait else 'false'}", "--timeout=600s")

    def _delete_trainjob_objects(self, namespace: str) -> int:
        """Delete each kind of TrainJob object in `namespace` in one request; how many were still there."""
        from kubernetes import client

        remaining = 0
        for group, version, plural in self.TRAINJOB_OBJECTS:
            if group == "batch":
                batch = client.BatchV1Api(self.api_client)
                remaining += len(batch.list_namespaced_job(namespace).items)
                batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
            else:
                remaining += len(self.custom.list_namespaced_custom_object(group, version, namespace, plural)["items"])
                self.custom.delete_collection_namespaced_custom_object(group, version, namespace, plural,
                                                                       propagation_policy="Background")
        return remaining

    def wait(self, predicate, timeout: float = 60, interval: float = 0.5, what: str = "condition"):
        return wait_for(predicate, timeout, what, interval)

    # Positive markers: a check that something did NOT happen first waits until it had every chance to.
    def metric(self, port_name: str, name: str, **labels: str) -> float:
        """The sum of one Prometheus metric's samples (those with these label values) on a local process's metrics
        endpoint."""
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.spec.ports.port(port_name)}/metrics", timeout=5) as r:
            text = r.read().decode()
        wanted = [f'{key}="{value}"' for key, value in labels.items()]
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " ")
                   and all(label in line for label in wanted))

    def scheduler_cycles(self) -> float:
        """Volcano's scheduling sessions so far (one e2e latency sample per session)."""
        return self.metric("volcano_scheduler_metrics", "volcano_e2e_scheduling_latency_milliseconds_count")

    def reconciles(self) -> float:
        """The TrainJob controller's reconciles so far (every result)."""
        return self.metric("controller_metrics", "trainyard_trainjob_reconcile_total")

    def wait_scheduler_cycles(self, count: int = 3, timeout: float = 60) -> None:
        """Until Volcano has run `count` more full scheduling sessions: what was schedulable is placed by then."""
        start = self.scheduler_cycles()
        self.wait(lambda: self.scheduler_cycles() >= start + count, timeout, 0.2, f"{count} Volcano scheduling cycles")

    def reconciled_after(self, action, timeout: float = 60) -> None:
        """Run `action` (an edit that queues a reconcile), then wait until one more reconcile has finished:
        one edit at a time, since edits queued together are reconciled once."""
        before = self.reconciles()
        action()
        self.wait_reconciles(1, timeout, since=before)

    def wait_reconciles(self, count: int = 1, timeout: float = 60, since: float | None = None) -> None:
        """Until the controller has finished `count` more reconciles than `since` (default: now)."""
        start = self.reconciles() if since is None else since
        self.wait(lambda: self.reconciles() >= start + count, timeout, 0.2, f"{count} more TrainJob reconciles")


@pytest.fixture(autouse=True)
def _delete_test_namespaces(request):
    yield
    cluster = request.node.funcargs.get("cluster") if hasattr(request.node, "funcargs") else None
    if isinstance(cluster, Cluster):
        cluster.delete_created_namespaces()


@pytest.fixture(scope="session")
def cluster():
    ensure_built(*local.REQUIRED_TOOLS)
    if local.is_running(TEST_CLUSTER.name):  # a previous run died: start fresh
        local.down(TEST_CLUSTER.name, echo=lambda *_: None)
    local.up(TEST_CLUSTER, echo=lambda *_: None)
    try:
        yield Cluster(TEST_CLUSTER)
    finally:
        if not os.environ.get("TRAINYARD_KEEP_TEST_CLUSTER"):
            local.down(TEST_CLUSTER.name, echo=lambda *_: None)


# --------------------------------------------------------------------------- platform (Pulumi)
PLATFORM_STACK = "it"


class PlatformStack:
    """The repository's platform program deployed on a test cluster through the Automation API.

    The project is the repository's own (Pulumi.yaml, __main__.py), copied to a temp directory with a
    stack file built from one of stacks/ and pointed at the test cluster, so tests never write into stacks/.
    """

    def __init__(self, cluster_name: str, workdir, values: dict | None = None, stack: str = PLATFORM_STACK):
        from pulumi import automation as auto

        from trainyard.paths import repo_root
        from trainyard.pulumi_env import install_plugins, offline_env
        from trainyard.toolchain.versions import tool

        root = repo_root()
        self.cluster_name = cluster_name
        self.cluster = None  # the session's Cluster handle, when deployed on it
        self.workdir = workdir
        self.stack_name = stack
        (workdir / "stacks").mkdir(parents=True, exist_ok=True)
        project = yaml.safe_load((root / "Pulumi.yaml").read_text())
        project["runtime"]["options"]["virtualenv"] = str(root / ".venv")
        (workdir / "Pulumi.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
        (workdir / "__main__.py").write_text((root / "__main__.py").read_text())
        paths = local.ClusterPaths.for_name(cluster_name)
        if values is None:  # the local stack, bound to this cluster as `trainyard up` binds it
            from trainyard import stack_deploy

            values = stack_deploy.bind_to_local_cluster(stack_deploy.read_stack_file("local"),
                                                        local.read_state(cluster_name), paths.certs)
        self.values = values
        self.write_config()
        env = offline_env(backend_dir=workdir / "state")
        self.env = env
        install_plugins()
        command = auto.PulumiCommand(root=str(tool("pulumi").install_dir), skip_version_check=True)
        workspace = auto.LocalWorkspace(work_dir=str(workdir), pulumi_command=command, env_vars=env)
        self.stack = auto.Stack.create_or_select(stack, workspace)

    def write_config(self) -> None:
        (self.workdir / "stacks" / f"Pulumi.{self.stack_name}.yaml").write_text(yaml.safe_dump(self.values))

    def up(self):
        """What `trainyard platform up` does: up, then refresh (records the live state of adopted objects)."""
        result = self.stack.up(on_output=lambda line: None, color="never")
        self.stack.refresh(on_output=lambda line: None, color="never")
        return result

    def preview(self):
        """The preview result; `.changed` lists the preview lines of resources it would change (for messages)."""
        lines: list[str] = []
        result = self.stack.preview(on_output=lines.append, diff=True, color="never")
        result.changed = [line for line in "\n".join(lines).splitlines() if line.lstrip()[:1] in ("~", "+", "-")]
        return result

    def destroy(self):
        return self.stack.destroy(on_output=lambda line: None, color="never")


@pytest.fixture(scope="session")
def platform(cluster, tmp_path_factory):
    ensure_built("pulumi", "pulumi-kubernetes", "pulumi-policy-analyzer")
    stack = PlatformStack(cluster.name, tmp_path_factory.mktemp("platform"))
    stack.cluster = cluster
    stack.up()
    return stack


@pytest.fixture(scope="session")
def platform_stack():
    """The PlatformStack class, for tests that deploy stacks of their own (other clusters, other stacks)."""
    return PlatformStack
