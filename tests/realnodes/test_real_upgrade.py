"""Upgrading trainyard from its previous release to this checkout with work in flight, on the real nodes.

The previous release (its tag, or the commit docs/changelog.md records for it) runs as the in-cluster controller:
its own image (`trainyard cluster load-image controller --revision previous`, built from that release's files) and
the Deployment, Services, RBAC and webhook registration its own platform program renders (that release installed
on its own, first on the path). Then, as `trainyard platform up` would, the checkout's render is applied over it
under the same field manager while:
- a real torch TrainJob trains across both real nodes,
- another tenant's torch gang waits for those GPUs,
- a suspended TrainJob waits to be resumed,
- a client creates a TrainJob every second and counts every refusal.

Then the new controller pods are restarted, as the next upgrade will replace them, the client still creating.

Afterwards: no running pod was restarted, the waiting and suspended TrainJobs run to completion under the new
controller, every TrainJob the client created exists once with one JobSet and one PodGroup built from it, and the
usage record of the running job has no gap. Not one create was refused while the new pods, which drain before they
stop, restarted; during the upgrade itself, only when the release upgraded from has no drain (0.4.0 and before), a
call caught by one of its pods stopping at once.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from trainyard.cluster import local, monitoring
from trainyard.cluster.processes import ProcessTable
from trainyard.cluster.spec import ClusterSpec
from trainyard.cluster.trainer_controllers import PROCESS as LOCAL_CONTROLLER
from trainyard.images import releases
from trainyard.paths import repo_root
from trainyard.platform.stack_config import ControllerSpec, WebhookSpec
from trainyard.platform.tenant_objects import TRAINJOB_COUNT
from trainyard.timestamps import parse_time
from incluster import (NAMESPACE, admission_answers, apply, controller_pods, ctl, leader, picture, ready, remove,
                       rendered_objects, rolled_out, serving_secret)
from realcluster import NAME, REAL_NODES, trainyard
from test_real_checkpoint_reclaim import USERS, create, final_loss, finished, pods_of_ns, simulated_filler, trainjob
from test_real_training import logs
from waiting import wait_for

pytestmark = pytest.mark.integration

COMMAND = ["torchrun", "/opt/trainyard/scripts/torch_checkpointed_sgd.py"]
RUNNING_ENV = {"TRAIN_STEPS": "480", "STEP_SECONDS": "0.5", "CHECKPOINT_EVERY": "100000", "SEED": "5"}
"""About 240 s of training: a minute of it before the rollout, which it outlasts by far."""
WAITING_ENV = {"TRAIN_STEPS": "20", "STEP_SECONDS": "0.1", "CHECKPOINT_EVERY": "100000", "SEED": "6"}
FLOW_LABEL = "trainyard.dev/test-upgrade-flow"
CREATE_EVERY_S = 1.0


def load_controller_image(*revision: str) -> str:
    loaded = trainyard("cluster", "load-image", "controller", "--name", NAME, *revision)
    assert loaded.returncode == 0, loaded.stdout[-3000:] + loaded.stderr[-2000:]
    return re.search(r"loaded (\S+)", loaded.stdout).group(1)


@pytest.fixture(scope="module")
def previous_package(tmp_path_factory):
    """The previous release installed on its own (no dependencies: the checkout's environment has them)."""
    repo = repo_root()
    release = releases.previous_release(repo)
    scratch = tmp_path_factory.mktemp("previous-release")
    source = releases.export_tree(repo, release.commit, scratch / "source")
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                                "--target", str(scratch / "package"), str(source)], capture_output=True, text=True,
                               timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    version = subprocess.run([sys.executable, "-c", "import trainyard; print(trainyard.__version__)"],
                             capture_output=True, text=True, env={"PYTHONPATH": str(scratch / "package")}, cwd="/")
    assert version.stdout.strip() == release.version, (version.stdout, version.stderr)
    return release, scratch / "package"


class CreatingClient(threading.Thread):
    """Creates a suspended one-GPU TrainJob as a tenant user every CREATE_EVERY_S until stopped; keeps each answer."""

    def __init__(self, cluster, namespace: str):
        super().__init__(daemon=True)
        self.cluster, self.namespace = cluster, namespace
        self.answers: list[tuple[float, str, int, str]] = []  # (time, name, returncode, stderr)
        self.stopping = threading.Event()

    def run(self) -> None:
        index = 0
        while not self.stopping.is_set():
            name = f"flow-{index:04d}"
            document = simulated_filler(name)
            document["metadata"]["namespace"] = self.namespace
            document["metadata"]["labels"] = {FLOW_LABEL: "true"}
            document["spec"]["suspend"] = True
            document["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": "100m", "nvidia.com/gpu": "1"},
                                                               "limits": {"nvidia.com/gpu": "1"}}
            started = time.time()
            done = self.cluster.kubectl("create", "-f", "-", user=USERS[self.namespace],
                                        input_text=yaml.safe_dump(document), timeout=60)
            self.answers.append((started, name, done.returncode, done.stderr.strip()))
            index += 1
            self.stopping.wait(max(0.0, CREATE_EVERY_S - (time.time() - started)))

    @property
    def created(self) -> list[str]:
        return [name for _, name, code, _ in self.answers if code == 0]

    @property
    def refused(self) -> list[tuple[float, str, str]]:
        return [(at, name, err) for at, name, code, err in self.answers if code != 0]


class ControllerTimeline(threading.Thread):
    """What the controller's pods were each second (ready, terminating, gone): set beside a refused create, it says
    which pod the API server's webhook call could have reached."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.cluster, self.stopping, self.changes = cluster, threading.Event(), []
        self.last: dict[str, str] = {}

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            pods = self.cluster.items("pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={ctl.NAME}")
            now = {p["metadata"]["name"]: ("terminating" if p["metadata"].get("deletionTimestamp") else
                                           "ready" if ready(p) else p["status"].get("phase", "?")) for p in pods}
            for name in sorted(set(now) | set(self.last)):
                if now.get(name, "gone") != self.last.get(name, "gone"):
                    self.changes.append((round(time.time(), 1), name, now.get(name, "gone")))
            self.last = now


def drains(objects: list[dict]) -> bool:
    """Whether a render's controller pods keep serving a while after they are told to stop (a preStop hook)."""
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    return any((c.get("lifecycle") or {}).get("preStop") for c in deployment["spec"]["template"]["spec"]["containers"])


def at_a_stop(refusal: tuple[float, str, str], changes: list[tuple[float, str, str]], pods: set[str]) -> bool:
    """A webhook call that timed out or found no listener when it was made while one of `pods` stopped (the
    timeline sees a change up to a second late; the call may wait its 10 s timeout)."""
    at, _, error = refusal
    stops = [t for t, name, state in changes if name in pods and state in ("terminating", "gone")]
    return ("deadline exceeded" in error or "connection refused" in error) and any(t - 3 <= at <= t + 12 for t in stops)


def owned_by(items: list[dict], trainjob: dict) -> list[dict]:
    return [i for i in items if any(o.get("uid") == trainjob["metadata"]["uid"]
                                    for o in i["metadata"].get("ownerReferences") or [])]


def rank0_pod(cluster, name: str, namespace: str) -> dict:
    return next(p for p in pods_of_ns(cluster, name, namespace) if p["metadata"]["name"].startswith(f"{name}-node-0-0"))


def samples(cluster_name: str, selector: str, start: float, end: float, value: float) -> list[float]:
    """When the one series `selector` names was recorded with `value` in [start, end]: its raw samples (a range
    query would fill gaps shorter than Prometheus' five-minute lookback)."""
    spec = ClusterSpec(**local.read_state(cluster_name)["spec"])
    url = (f"http://127.0.0.1:{spec.ports.port('prometheus')}/api/v1/query?"
           + urllib.parse.urlencode({"query": f"{selector}[{int(end - start) + 1}s]", "time": f"{end:.3f}"}))
    with urllib.request.urlopen(url, timeout=30) as answer:
        body = json.load(answer)
    assert body["status"] == "success" and len(body["data"]["result"]) == 1, body
    return [float(t) for t, v in body["data"]["result"][0]["values"] if float(t) >= start and float(v) == value]


@pytest.fixture
def trainjob_quota(real_cluster):
    """team-a may hold enough TrainJobs for the client's flow (the stack's 50 restored afterwards)."""
    quota = next(q for q in real_cluster.items("resourcequotas", "-n", "team-a") if TRAINJOB_COUNT in q["spec"]["hard"])
    name, before = quota["metadata"]["name"], quota["spec"]["hard"][TRAINJOB_COUNT]
    patch = lambda value: real_cluster.kubectl("patch", "resourcequota", name, "-n", "team-a", "--type=merge", "-p",  # noqa: E731
                                               json.dumps({"spec": {"hard": {TRAINJOB_COUNT: value}}}))
    assert patch("1000").returncode == 0
    yield
    patch(before)


def test_upgrading_from_the_previous_release_with_training_running_restarts_nothing_and_refuses_nothing(
        real_cluster, previous_package, trainjob_quota, tmp_path):
    release, package = previous_package
    paths = local.ClusterPaths.for_name(NAME)
    ProcessTable(paths.root).stop(LOCAL_CONTROLLER)
    spec = ControllerSpec(replicas=REAL_NODES, webhook=WebhookSpec(certificate="provided"))
    secret, _ = serving_secret(paths.root / "incluster-certs", spec)
    ca_file = paths.root / "incluster-certs" / "ca.crt"

    old_image = load_controller_image("--revision", "previous")
    assert old_image.startswith("trainyard.local/controller:"), old_image
    old_objects = rendered_objects(old_image, REAL_NODES, ca_file, package)
    old_objects.insert(1, secret)
    apply(real_cluster, old_objects)
    rolled_out(real_cluster)
    admission_answers(real_cluster)
    old_pods = {p["metadata"]["name"] for p in controller_pods(real_cluster)}
    assert {c["image"] for p in controller_pods(real_cluster) for c in p["spec"]["containers"]} == {old_image}
    new_image = load_controller_image()
    assert new_image != old_image, "the checkout's controller image is the release's: nothing to upgrade"
    new_objects = rendered_objects(new_image, REAL_NODES, ca_file)
    new_objects.insert(1, secret)

    try:
        # Work in flight under the previous release.
        running = create(real_cluster, trainjob("team-a", "upgrade-running", COMMAND, 4, RUNNING_ENV))
        waiting = create(real_cluster, trainjob("team-b", "upgrade-waiting", COMMAND, 8, WAITING_ENV))
        suspended_doc = simulated_filler("upgrade-suspended")
        suspended_doc["spec"]["suspend"] = True
        suspended_doc["spec"]["trainer"]["resourcesPerNode"]["requests"]["nvidia.com/gpu"] = "1"
        suspended_doc["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] = "1"
        suspended_doc["spec"]["podTemplateOverrides"][0]["metadata"]["annotations"] = {
            "pod-complete.stage.kwok.x-k8s.io/delay": "5s"}
        suspended = create(real_cluster, suspended_doc)

        def training() -> list[dict] | None:
            pods = pods_of_ns(real_cluster, running, "team-a")
            if len(pods) != 2 or any(p["status"].get("phase") != "Running" for p in pods):
                return None  # no log to read before the containers start
            steps = logs(real_cluster, pods[0]["metadata"]["name"], missing_ok=True)
            return pods if steps and "step 5 " in steps else None

        before = wait_for(training, 300, "the running TrainJob training on both real nodes", 2, error=None)
        assert before, picture(real_cluster)
        assert real_cluster.get("jobsets.jobset.x-k8s.io", suspended, "team-a"), "the suspended one's JobSet exists"
        assert not pods_of_ns(real_cluster, waiting, "team-b") or all(
            p["status"].get("phase") == "Pending" for p in pods_of_ns(real_cluster, waiting, "team-b"))

        # the usage record has the running job before the upgrade begins (a few rule evaluations)
        first = min(parse_time(p["status"]["startTime"]).timestamp() for p in before)
        time.sleep(max(0.0, first + 4 * monitoring.SCRAPE_INTERVAL_S - time.time()))
        client = CreatingClient(real_cluster, "team-a")
        timeline = ControllerTimeline(real_cluster)
        timeline.start()
        client.start()
        time.sleep(5)
        upgrade_started = time.time()
        apply(real_cluster, new_objects)
        rolled_out(real_cluster)
        new_pods = {p["metadata"]["name"] for p in controller_pods(real_cluster)}
        assert new_pods.isdisjoint(old_pods)
        assert wait_for(lambda: leader(real_cluster) in new_pods, 90, "a new pod leads", 1, error=None), picture(real_cluster)
        rollout_s = time.time() - upgrade_started
        time.sleep(10)
        # From this release on a stopping controller pod drains (preStop): restarting the new pods, as the next
        # upgrade will replace them, must not refuse a single create.
        restart_started = time.time()
        assert real_cluster.kubectl("rollout", "restart", "-n", NAMESPACE, f"deployment/{ctl.NAME}").returncode == 0
        rolled_out(real_cluster)
        time.sleep(10)
        client.stopping.set()
        timeline.stopping.set()
        client.join(60)

        # The running job was untouched: its pods are the same, never restarted, and it trained to the end.
        after = pods_of_ns(real_cluster, running, "team-a")
        assert {p["metadata"]["uid"] for p in after} == {p["metadata"]["uid"] for p in before}, "no pod replaced"
        statuses = [s for p in after for s in p["status"].get("containerStatuses") or []]
        assert all(s["restartCount"] == 0 for s in statuses) and all("running" in s["state"] for s in statuses), \
            ("the running job must still be training after the rollout", statuses)
        pod0 = rank0_pod(real_cluster, running, "team-a")["metadata"]["name"]
        complete = finished(real_cluster, running, "team-a", 420)
        assert complete["type"] == "Complete"
        text = logs(real_cluster, pod0)
        assert len(re.findall(r"^step \d+ loss", text, re.M)) == int(RUNNING_ENV["TRAIN_STEPS"]) and final_loss(text)

        # The waiting gang and the suspended TrainJob proceed under the new controller.
        assert finished(real_cluster, waiting, "team-b", 300)["type"] == "Complete"
        resumed = real_cluster.kubectl("patch", "trainjob", suspended, "-n", "team-a", "--type=merge", "-p",
                                       '{"spec": {"suspend": false}}', user=USERS["team-a"])
        assert resumed.returncode == 0, resumed.stderr
        assert finished(real_cluster, suspended, "team-a", 180)["type"] == "Complete"

        # Not one create was refused during the rollout; each TrainJob created is there once, built once.
        # Not one create was refused during the rollout, except, when the release upgraded from has no drain, a call
        # caught by one of its pods stopping at once; not one during the restart of the drained pods.
        context = ("controller pods:", timeline.changes, "answers:",
                   [(round(at, 1), name, code) for at, name, code, _ in client.answers])
        undrained = [] if drains(old_objects) else \
            [r for r in client.refused if r[0] < restart_started and at_a_stop(r, timeline.changes, old_pods)]
        assert [r for r in client.refused if r not in undrained] == [], (client.refused, *context)
        assert not [r for r in client.refused if r[0] >= restart_started], "a drained pod refused"
        assert len(client.created) >= rollout_s / CREATE_EVERY_S / 2, (len(client.created), rollout_s)
        flow = {t["metadata"]["name"]: t for t in real_cluster.items("trainjobs", "-n", "team-a", "-l", FLOW_LABEL)}
        assert sorted(flow) == sorted(client.created), "no TrainJob lost or made twice"

        def all_built() -> bool:
            jobsets = real_cluster.items("jobsets.jobset.x-k8s.io", "-n", "team-a")
            return all(len(owned_by(jobsets, t)) == 1 for t in flow.values())

        assert wait_for(all_built, 120, "a JobSet for every TrainJob the client created", 2, error=None), \
            picture(real_cluster)
        podgroups = real_cluster.items("podgroups.scheduling.volcano.sh", "-n", "team-a")
        jobsets = real_cluster.items("jobsets.jobset.x-k8s.io", "-n", "team-a")
        for trainjob_object in flow.values():
            (jobset,) = owned_by(jobsets, trainjob_object)
            assert len(owned_by(podgroups, trainjob_object)) == 1 and jobset["spec"].get("suspend") is True

        # The usage record of the running job has a sample at every rule evaluation across the upgrade.
        start_epoch = first + 3 * monitoring.SCRAPE_INTERVAL_S
        end_epoch = parse_time(complete["lastTransitionTime"]).timestamp() - 2 * monitoring.SCRAPE_INTERVAL_S
        assert start_epoch < upgrade_started and end_epoch > upgrade_started + rollout_s, "the window spans the upgrade"
        stamps = samples(NAME, f'{monitoring.TRAINJOB_GPUS}{{namespace="team-a",trainjob="{running}"}}',
                         start_epoch, end_epoch, value=8)
        gaps = [(a, b) for a, b in zip([start_epoch, *stamps], [*stamps, end_epoch])
                if b - a > monitoring.SCRAPE_INTERVAL_S + 2]
        assert stamps and not gaps, (gaps, stamps)
        print(f"\nupgrade {release.tag} -> checkout: rollout {rollout_s:.0f} s, {len(client.created)} TrainJobs created around it "
              f"and a restart of the drained pods, {len(client.refused)} refused ({len(undrained)} as a pod of "
              f"{release.tag}, which does not drain, stopped), {len(stamps)} usage samples of the running job without a gap")
    finally:
        real_cluster.kubectl("delete", "trainjobs", "-n", "team-a", "-l", FLOW_LABEL, "--wait=true", timeout=300)
        remove(real_cluster, new_objects)
        for namespace, name in (("team-a", "upgrade-running"), ("team-b", "upgrade-waiting"),
                                ("team-a", "upgrade-suspended")):
            real_cluster.kubectl("delete", "trainjob", name, "-n", namespace, "--ignore-not-found", "--wait=false")
