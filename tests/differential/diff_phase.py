"""One phase of the differential run: with one TrainJob controller running, create the runtimes and the (suspended)
TrainJobs in bulk in one namespace, ask its admission about the invalid table (server-side dry run), wait until
nothing changes any more, and collect, per TrainJob, what it produced."""

from __future__ import annotations

import copy
import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from diff_cases import API, GROUP, VERSION, Case
from waiting import wait_for

JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
PODGROUP = ("scheduling.volcano.sh", "v1beta1", "podgroups")
WORKERS = 4


@dataclass
class PhaseResult:
    which: str
    namespace: str
    refused_runtimes: dict[str, str] = field(default_factory=dict)  # runtime name -> message
    refused: dict[str, str] = field(default_factory=dict)  # TrainJob name -> message
    accepted: list[str] = field(default_factory=list)
    objects: dict[str, list[dict]] = field(default_factory=dict)  # TrainJob name -> its objects (incl. itself)
    admission: dict[str, str | None] = field(default_factory=dict)  # invalid case -> refusal message or None
    seconds: dict[str, float] = field(default_factory=dict)


class Api:
    def __init__(self, kubeconfig: str):
        from kubernetes import client, config

        self.client = config.new_client_from_config(config_file=kubeconfig)
        self.core = client.CoreV1Api(self.client)
        self.custom = client.CustomObjectsApi(self.client)

    def create(self, obj: dict, namespace: str | None = None, dry_run: bool = False) -> str | None:
        """Create; None when admitted, else the API server's message."""
        from kubernetes.client.exceptions import ApiException

        group, version = obj["apiVersion"].split("/") if "/" in obj["apiVersion"] else ("", obj["apiVersion"])
        plural = {"ClusterTrainingRuntime": "clustertrainingruntimes", "TrainingRuntime": "trainingruntimes",
                  "TrainJob": "trainjobs", "Queue": "queues", "PriorityClass": "priorityclasses"}[obj["kind"]]
        kwargs = {"dry_run": "All"} if dry_run else {}
        try:
            if namespace:
                self.custom.create_namespaced_custom_object(group, version, namespace, plural, obj, **kwargs)
            else:
                self.custom.create_cluster_custom_object(group, version, plural, obj, **kwargs)
            return None
        except ApiException as exc:
            if exc.status == 409 and not dry_run:
                return None if obj["kind"] in ("Queue", "PriorityClass") else f"AlreadyExists: {exc.body}"
            try:
                return json.loads(exc.body).get("message") or exc.body
            except (TypeError, ValueError):
                return str(exc.body)

    def list(self, group: str, version: str, plural: str, namespace: str) -> list[dict]:
        return self.custom.list_namespaced_custom_object(group, version, namespace, plural)["items"]

    def list_core(self, kind: str, namespace: str) -> list[dict]:
        method = {"Secret": self.core.list_namespaced_secret, "ConfigMap": self.core.list_namespaced_config_map}[kind]
        items = self.client.sanitize_for_serialization(method(namespace).items)
        for item in items:
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", "v1")
        return items

    def ensure_namespace(self, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.create_namespace({"metadata": {"name": name}})
        except ApiException as exc:
            if exc.status != 409:
                raise


def _bulk(fn, items: list) -> list:
    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(fn, items))


def run_phase(api: Api, which: str, namespace: str, cases: list[Case], invalid: list[tuple[str, dict]],
              extra_runtimes: list[dict], only: set[str] | None = None, settle: float = 2.0,
              timeout: float = 150.0) -> PhaseResult:
    """Create everything, wait until stable, collect. `only`: the TrainJob names to create (the other phase's
    accepted ones); None creates every case."""
    result = PhaseResult(which, namespace)
    started = time.monotonic()
    api.ensure_namespace(namespace)
    wanted = [c for c in cases if only is None or c.name in only]
    runtimes = {(r["kind"], r["metadata"]["name"]): r for c in cases for r in c.runtimes}  # all: compared too
    for r in extra_runtimes:
        runtimes[(r["kind"], r["metadata"]["name"])] = r

    def create_runtime(runtime: dict) -> tuple[str, str | None]:
        scoped = runtime["kind"] == "TrainingRuntime"
        return runtime["metadata"]["name"], api.create(copy.deepcopy(runtime), namespace if scoped else None)

    for name, message in _bulk(create_runtime, list(runtimes.values())):
        if message:
            result.refused_runtimes[name] = message
    result.seconds["runtimes"] = time.monotonic() - started
    time.sleep(settle)  # the webhooks look runtimes up in their informer caches

    for case_name, tj in invalid:
        result.admission[case_name] = api.create(copy.deepcopy(tj), namespace, dry_run=True)

    def create_trainjob(case: Case) -> tuple[str, str | None]:
        return case.name, api.create(copy.deepcopy(case.trainjob), namespace)

    t0 = time.monotonic()
    pending = wanted
    for attempt in range(2):  # a refusal right after the runtime's create can be a cache lag: retry once
        refused = {name: msg for name, msg in _bulk(create_trainjob, pending) if msg}
        pending = [c for c in pending if c.name in refused]
        if not pending:
            break
        if attempt == 0:
            time.sleep(3)
    result.refused = refused if pending else {}
    result.accepted = [c.name for c in wanted if c.name not in result.refused]
    result.seconds["create"] = time.monotonic() - t0

    t0 = time.monotonic()
    result.objects = wait_and_collect(api, namespace, set(result.accepted), timeout)
    result.seconds["reconcile"] = time.monotonic() - t0
    result.seconds["total"] = time.monotonic() - started
    return result


def collect(api: Api, namespace: str) -> dict[str, list[dict]]:
    """Every TrainJob of the namespace with the objects it owns (JobSets, PodGroups, Secrets, ConfigMaps)."""
    out: dict[str, list[dict]] = {}
    for tj in api.list(GROUP, VERSION, "trainjobs", namespace):
        tj.setdefault("kind", "TrainJob")
        tj.setdefault("apiVersion", API)
        out[tj["metadata"]["name"]] = [tj]
    children = (api.list(*JOBSET, namespace) + api.list(*PODGROUP, namespace) + api.list_core("Secret", namespace)
                + api.list_core("ConfigMap", namespace))
    for child in children:
        for ref in child["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "TrainJob" and ref["name"] in out:  # owned, controller or not
                out[ref["name"]].append(child)
                break
    return out


def _fingerprint(objects: dict[str, list[dict]]) -> str:
    keys = sorted((o["kind"], o["metadata"]["name"], o["metadata"]["resourceVersion"])
                  for items in objects.values() for o in items)
    return hashlib.sha256(json.dumps(keys).encode()).hexdigest()


def _settled(objects: list[dict]) -> bool:
    """The TrainJob has a condition and, when it has a JobSet, the JobSet controller's status has reached it."""
    if not objects or not (objects[0].get("status") or {}).get("conditions"):
        return False
    jobsets = [o for o in objects if o["kind"] == "JobSet"]
    return all((js.get("status") or {}).get("conditions") for js in jobsets) and (
        not jobsets or bool(objects[0]["status"].get("jobsStatus")))


def wait_and_collect(api: Api, namespace: str, names: set[str], timeout: float, quiet_polls: int = 3,
                     interval: float = 1.0) -> dict[str, list[dict]]:
    """Poll until every TrainJob has a status condition and nothing changed for `quiet_polls` polls in a row
    (a TrainJob whose resources cannot be built may never get a condition: the deadline ends the wait)."""
    objects: dict[str, list[dict]] = {}
    last, quiet = None, 0

    def settled_and_quiet() -> bool:
        nonlocal objects, last, quiet
        objects = collect(api, namespace)
        print_ = _fingerprint(objects)
        quiet = quiet + 1 if print_ == last else 0
        last = print_
        done = all(_settled(objects.get(n) or []) for n in names)
        return (done and quiet >= quiet_polls) or quiet >= 3 * quiet_polls

    wait_for(settled_and_quiet, timeout, f"the TrainJobs of {namespace} settled", interval, error=None)
    return {n: objects.get(n, []) for n in names}


def clean_up(api: Api, namespace: str, cluster_runtimes: list[str]) -> None:
    """With no TrainJob controller running: delete the phase's TrainJobs and runtimes (upstream puts a
    resource-in-use finalizer on runtimes; it is removed first) and the namespace."""
    from kubernetes.client.exceptions import ApiException

    api.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, namespace, "trainjobs")
    strip = {"metadata": {"finalizers": None}}
    for runtime in api.list(GROUP, VERSION, "trainingruntimes", namespace):
        if runtime["metadata"].get("finalizers"):
            api.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "trainingruntimes",
                                                      runtime["metadata"]["name"], strip)
    for name in cluster_runtimes:
        try:
            api.custom.patch_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", name, strip)
            api.custom.delete_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", name)
        except ApiException as exc:
            if exc.status != 404:
                raise
    api.core.delete_namespace(namespace)
    left: set[str] = set()

    def all_deleted() -> bool:
        nonlocal left
        left = {r["metadata"]["name"] for r in api.custom.list_cluster_custom_object(
            GROUP, VERSION, "clustertrainingruntimes")["items"]} & set(cluster_runtimes)
        return not left and not api.list(GROUP, VERSION, "trainjobs", namespace)

    if not wait_for(all_deleted, 60, f"the runtimes and TrainJobs of {namespace} deleted", 0.5, error=None):
        raise AssertionError(f"cluster runtimes {sorted(left)} or TrainJobs of {namespace} were not deleted")
