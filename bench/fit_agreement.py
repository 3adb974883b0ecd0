#!/usr/bin/env python3
"""Does `trainyard fit` say what then happens? Generated TrainJobs (tenants, runtimes, sizes, topology tiers,
priority classes, runtimes whose pods Pod Security or the ServiceAccount admission refuse; on an idle and on a
loaded cluster) are asked to `fit`, then created, and the outcome is
observed: placed (every pod bound), refused at create, or waiting (Volcano or the controller says why, nothing
bound). A waiting job is then given room (the load leaves, the cluster is idle) and watched for a bounded window:
placed after room was made, or never placed. Prints the verdict x outcome table, the agreement and every
disagreement; asserts nothing.

Agreement: fits -> placed; waits -> placed after room was made; refused ("can never start") -> refused at create or
never placed within the window (the window is stated in the results).

Usage: .venv/bin/python bench/fit_agreement.py [--count 100] [--seed 7] [--start-window 20] [--out DIR] [--keep]
It starts its own cluster (name trainyard-fitbench, ports from 27800: 4 nodes x 8 GPUs, 2 racks, 1 spine).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from trainyard import k8s as K
from trainyard.cluster import local, tenant_readiness
from trainyard.cluster.spec import ClusterSpec
from trainyard.platform.stack_config import TenantGroups, TenantQuota, TenantSpec
from trainyard.platform.tenant_bundle import shared_bundle, tenant_bundle
from trainyard.queues.hypernodes import TopologySpec, racks_from_node_labels, render_hypernodes
from trainyard.queues.volcano_queues import QueueSpec
from trainyard.waiting import wait_for

SPEC = ClusterSpec(name="trainyard-fitbench", port_base=27800, feature_gates="TrainJobStatus=false", monitoring=False)
FITS, WAITS, REFUSED = "fits", "waits", "refused"
PLACED, WAITING, REFUSED_AT_CREATE, UNKNOWN = "placed", "waiting", "refused at create", "no evidence"
PLACED_LATER, NEVER_PLACED = "placed after room was made", "never placed"
VERDICTS = {0: FITS, 1: WAITS, 2: REFUSED}
AGREES = {FITS: {PLACED}, WAITS: {PLACED_LATER}, REFUSED: {REFUSED_AT_CREATE, NEVER_PLACED}}
IMAGE = "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
LOAD_PODS = 3  # x 8 GPUs: one node of four left free


@dataclass(frozen=True)
class Platform:
    """The names one setup created (a prefix keeps a bench apart from tests on a shared cluster)."""

    prefix: str

    def name(self, what: str) -> str:
        return f"{self.prefix}-{what}"

    @property
    def tenants(self) -> dict[str, tuple[int, int]]:
        """tenant -> (GPU quota, queue GPU capability): room, a small quota, a queue smaller than its quota."""
        return {self.name("a"): (32, 32), self.name("b"): (16, 16), self.name("c"): (64, 12), self.name("load"): (24, 24)}

    @property
    def runtimes(self) -> list[str]:
        return [self.name("gang"), self.name("gangless"), self.name("rack")]

    @property
    def refused_runtimes(self) -> list[str]:
        """Runtimes whose pods an admission layer refuses: Pod Security (baseline: no privileged container) and
        the ServiceAccount admission (an account the namespace does not have)."""
        return [self.name("privileged"), self.name("ghost-sa")]

    @property
    def high(self) -> str:
        return self.name("high")

    @property
    def low(self) -> str:
        return self.name("low")


def tenant(platform: Platform, name: str) -> TenantSpec:
    quota, capability = platform.tenants[name]
    return TenantSpec(name=name, namespace=name, catalog_version="1.2.0",
                      queue=QueueSpec(name=name, capability={K.GPU_RESOURCE: capability, "cpu": 384, "memory": "4096Gi"}),
                      quota=TenantQuota(cpu=384, memory="4096Gi", gpu=quota, train_jobs=1000),
                      default_priority_class=platform.low,
                      priority_classes=(platform.high,) if name == platform.name("a") else (),
                      groups=TenantGroups.defaults_for(name))


def runtime(name: str, policy: dict | None, container: dict | None = None, **pod_fields) -> dict:
    pod: dict = {"containers": [{"name": "node", "image": IMAGE, "command": ["torchrun", "train.py"],
                                 "resources": {"limits": {K.GPU_RESOURCE: "8"}}, **(container or {})}], **pod_fields}
    spec: dict = {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [{
        "name": "node", "template": {"metadata": {"labels": {K.LABEL_ANCESTOR: "trainer"}},
                                     "spec": {"template": {"spec": pod}}}}]}}}
    if policy is not None:
        spec["podGroupPolicy"] = policy
        pod["schedulerName"] = K.VOLCANO_SCHEDULER_NAME
    return {"apiVersion": K.TRAINER_API_VERSION, "kind": "ClusterTrainingRuntime",
            "metadata": {"name": name, "labels": {K.LABEL_FRAMEWORK: "torch"}}, "spec": spec}


def platform_objects(platform: Platform) -> list[dict]:
    """Priority classes, runtimes and tenants (not the shared policies or HyperNodes: `Bench.setup` decides)."""
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
               for n, v in ((platform.low, 100), (platform.high, 10000))]
    gang, gangless, rack = platform.runtimes
    privileged, ghost = platform.refused_runtimes
    runtimes = [runtime(gang, {"volcano": {}}), runtime(gangless, None),
                runtime(rack, {"volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}),
                runtime(privileged, {"volcano": {}}, {"securityContext": {"privileged": True}}),
                runtime(ghost, {"volcano": {}}, serviceAccountName="ghost")]
    tenants = [obj for name in platform.tenants for obj in tenant_bundle(tenant(platform, name))]
    return classes + runtimes + tenants


@dataclass(frozen=True)
class Case:
    tenant: str
    runtime: str
    nodes: int
    gpus: int
    priority: str | None  # the trainyard.dev/priority-class label
    limits_only: bool
    loaded: bool

    def trainjob(self, name: str) -> dict:
        resources = {"limits": {K.GPU_RESOURCE: str(self.gpus)}}
        if not self.limits_only:
            resources["requests"] = {K.GPU_RESOURCE: str(self.gpus)}
        meta: dict = {"name": name, "namespace": self.tenant}
        if self.priority:
            meta["labels"] = {K.PRIORITY_CLASS_LABEL: self.priority}
        return {"apiVersion": K.TRAINER_API_VERSION, "kind": "TrainJob", "metadata": meta,
                "spec": {"runtimeRef": {"name": self.runtime},
                         "trainer": {"numNodes": self.nodes, "resourcesPerNode": resources}}}


def generate(platform: Platform, count: int, seed: int) -> list[Case]:
    """Half on the idle cluster, half with the load tenant holding three of the four nodes."""
    rng = random.Random(seed)
    users = [n for n in platform.tenants if n != platform.name("load")]
    cases = []
    for index in range(count):
        who = rng.choice(users)
        granted_high = who == platform.name("a") or rng.random() < 0.1  # else an ungranted class: refused
        priority = rng.choice([None, None, platform.low] + ([platform.high] if granted_high else []))
        refused_pods = rng.random() < 0.15  # pods an admission layer refuses, whatever their size
        kind = rng.choice(platform.refused_runtimes if refused_pods else platform.runtimes)
        cases.append(Case(tenant=who, runtime=kind, nodes=rng.choice([1, 1, 2, 2, 3, 4, 5]),
                          gpus=rng.choice([1, 2, 4, 8, 8, 16]), priority=priority, limits_only=rng.random() < 0.5,
                          loaded=index >= count // 2))
    return sorted(cases, key=lambda c: c.loaded)


class Bench:
    """One cluster, set up once: ask fit, create, observe, delete, case after case."""

    def __init__(self, cluster: str, platform: Platform, start_window: float = 20.0):
        from kubernetes import client, config

        self.cluster, self.platform, self.start_window = cluster, platform, start_window
        self.kubeconfig = str(local.ClusterPaths.for_name(cluster).kubeconfig)
        api = config.new_client_from_config(config_file=self.kubeconfig)
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self.sanitize = api.sanitize_for_serialization
        self.loaded = False

    def kubectl(self, *args: str, obj: dict | list | None = None) -> str:
        text = None if obj is None else json.dumps({"apiVersion": "v1", "kind": "List", "items": obj}
                                                   if isinstance(obj, list) else obj)
        return local.kubectl(self.cluster, *args, input_text=text)

    def setup(self, shared: bool = True) -> None:
        """`shared`: also the policies every tenant shares and the HyperNodes (a cluster of the bench's own);
        on a cluster whose platform already has them, leave them to it."""
        tenant_readiness.wait_quota_controller_counting(self.cluster, self.core)
        objects = platform_objects(self.platform)
        if shared:
            nodes = [self.sanitize(n) for n in self.core.list_node().items]
            objects = shared_bundle() + render_hypernodes(
                TopologySpec(racks=racks_from_node_labels(nodes, K.RACK_LABEL, K.SPINE_LABEL))) + objects
        self.created = objects
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", obj=objects)
        tenant_readiness.wait_tenants_in_force(self.cluster, self.core, self.platform.tenants)

    def teardown(self) -> None:
        """Delete what `setup` created (tenant namespaces with everything in them)."""
        self.load(False)
        for obj in reversed(self.created):
            if not (obj.get("metadata") or {}).get("namespace"):
                group = obj["apiVersion"].rpartition("/")[0]
                self.kubectl("delete", obj["kind"].lower() + (f".{group}" if group else ""), obj["metadata"]["name"],
                             "--ignore-not-found", "--wait=false")

    def load(self, on: bool) -> None:
        """The load tenant's Deployment holding three whole nodes (Volcano places it, in its queue)."""
        ns = self.platform.name("load")
        if on == self.loaded:
            return
        if on:
            self.kubectl("apply", "-f", "-", obj={
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "load", "namespace": ns},
                "spec": {"replicas": LOAD_PODS, "selector": {"matchLabels": {"app": "load"}}, "template": {
                    "metadata": {"labels": {"app": "load"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": {K.GPU_RESOURCE: "8"}}}]}}}})
            wait_for(lambda: len([p for p in self._pods(ns, "app=load") if p.status.phase == "Running"]) == LOAD_PODS,
                     90, "the load running", 0.5)
        else:
            self.kubectl("delete", "deployment", "load", "-n", ns, "--wait=true")
            wait_for(lambda: not self._pods(ns, "app=load"), 90, "the load gone", 0.5)
        self.loaded = on

    def run(self, case: Case, name: str) -> tuple[str, str, list[str]]:
        """(verdict, outcome, fit's lines) for one case; the TrainJob is gone again afterwards."""
        from trainyard.capacity.fit_check import run_fit

        self.load(case.loaded)
        trainjob = case.trainjob(name)
        lines, code = run_fit(json.loads(json.dumps(trainjob)), self.kubeconfig)
        verdict = VERDICTS[code]
        try:
            self.kubectl("create", "-f", "-", obj=trainjob)
        except local.ClusterError as exc:
            return verdict, REFUSED_AT_CREATE, lines + [f"(create: {str(exc)[-300:]})"]
        try:
            pods = self._pod_count(lines)
            outcome = self.observe(case.tenant, name, pods)
            if outcome == WAITING:  # room made: the load is the only other holder of GPUs
                self.load(False)
                outcome = PLACED_LATER if self.placed_within(case.tenant, name, pods, self.start_window) else NEVER_PLACED
            return verdict, outcome, lines
        finally:
            self.kubectl("delete", "trainjob", name, "-n", case.tenant, "--wait=true", "--timeout=120s")
            wait_for(lambda: not self._pods(case.tenant, f"jobset.sigs.k8s.io/jobset-name={name}"), 120,
                     f"the pods of {name} gone", 0.5)

    @staticmethod
    def _pod_count(lines: list[str]) -> int:
        gang = next((line for line in lines if line.startswith("gang: ")), "gang: 1 pod")
        return int(gang.split()[1])

    def observe(self, ns: str, name: str, pods: int, timeout: float = 60, settle: float = 4) -> str:
        """placed when every pod is bound; waiting once a reason was given and, `settle` s later, none is."""
        reason_at: float | None = None

        def outcome() -> str | None:
            nonlocal reason_at
            bound = [p for p in self._pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}") if p.spec.node_name]
            if len(bound) >= pods:
                return PLACED
            if reason_at is None and self._reason_given(ns, name):
                reason_at = time.monotonic()
            if reason_at is not None and not bound and time.monotonic() - reason_at >= settle:
                return WAITING
            return None

        return wait_for(outcome, timeout, f"the verdict on {name} to play out", 0.5, error=None) or UNKNOWN

    def placed_within(self, ns: str, name: str, pods: int, window: float) -> bool:
        def placed() -> bool:
            return len([p for p in self._pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}") if p.spec.node_name]) >= pods

        return bool(wait_for(placed, window, f"{name} placed once room was made", 0.5, error=None))

    def _reason_given(self, ns: str, name: str) -> bool:
        """The controller's failure condition, a PodGroup condition or Warning event, or a pod Volcano marked."""
        trainjob = self.custom.get_namespaced_custom_object(K.TRAINER_GROUP, K.TRAINER_VERSION, ns, K.TRAINJOBS, name)
        if any(c.get("type") == "ResourcesCreationFailed" and c.get("status") == "True"
               for c in (trainjob.get("status") or {}).get("conditions") or []):
            return True
        groups = self.custom.list_namespaced_custom_object(K.VOLCANO_GROUP, K.VOLCANO_VERSION, ns, K.PODGROUPS)["items"]
        group = next((g for g in groups if g["metadata"]["name"] == name), None)
        if group and any(c.get("type") == "Unschedulable" for c in (group.get("status") or {}).get("conditions") or []):
            return True
        events = self.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
        if any(e.type == "Warning" and e.involved_object.kind == "PodGroup" for e in events):
            return True
        return any(c.type == "PodScheduled" and c.reason == "Unschedulable"
                   for p in self._pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}") for c in p.status.conditions or [])

    def _pods(self, ns: str, selector: str) -> list:
        return self.core.list_namespaced_pod(ns, label_selector=selector).items


def tally(results: list[tuple[Case, str, str, list[str]]]) -> dict:
    table: dict[str, dict[str, int]] = {}
    for _, verdict, outcome, _ in results:
        table.setdefault(verdict, {}).setdefault(outcome, 0)
        table[verdict][outcome] += 1
    agreed = sum(1 for _, verdict, outcome, _ in results if outcome in AGREES[verdict])
    return {"cases": len(results), "agreed": agreed, "agreement": agreed / len(results) if results else 0.0,
            "table": table,
            "disagreements": [{"case": case.__dict__, "verdict": verdict, "outcome": outcome, "fit": lines}
                              for case, verdict, outcome, lines in results if outcome not in AGREES[verdict]]}


def run_all(bench: Bench, cases: list[Case], echo=print) -> dict:
    results = []
    for index, case in enumerate(cases):
        verdict, outcome, lines = bench.run(case, f"fa-{index}")
        results.append((case, verdict, outcome, lines))
        mark = "" if outcome in AGREES[verdict] else "   <-- disagreement"
        echo(f"{index:4d} {case.tenant:10s} {case.runtime:14s} {case.nodes}x{case.gpus:<2d} "
             f"{'loaded' if case.loaded else 'idle  '} {verdict:7s} {outcome}{mark}")
    bench.load(False)
    return tally(results)


def main(argv: list[str] | None = None) -> int:
    from trainyard.benchkit import run_record, write_results
    from trainyard.toolchain.build import ensure_built

    record = run_record(["bench/fit_agreement.py", *(sys.argv[1:] if argv is None else argv)])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start-window", type=float, default=20.0, help="seconds a waiting job is given to start "
                        "once room was made")
    parser.add_argument("--out", type=Path, help="write DIR/fit_agreement.json")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = parser.parse_args(argv)
    ensure_built(*local.REQUIRED_TOOLS)
    if local.is_running(SPEC.name):
        local.down(SPEC.name, echo=lambda *_: None)
    local.up(SPEC, echo=lambda *_: None)
    started = time.monotonic()
    try:
        platform = Platform("fa")
        bench = Bench(SPEC.name, platform, start_window=args.start_window)
        bench.setup()
        figures = run_all(bench, generate(platform, args.count, args.seed))
    finally:
        if not args.keep:
            local.down(SPEC.name, echo=lambda *_: None)
    print(f"\nverdict -> outcome: {json.dumps(figures['table'], sort_keys=True)}")
    print(f"agreement: {figures['agreed']}/{figures['cases']} = {100 * figures['agreement']:.1f} % "
          f"(target >= 99 %), {time.monotonic() - started:.0f} s")
    for item in figures["disagreements"]:
        print(json.dumps(item))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        results = {**figures, "seed": args.seed, "start_window_seconds": args.start_window,
                   "seconds": round(time.monotonic() - started, 1)}
        write_results(args.out, "fit_agreement", record, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
