"""`trainyard fit`'s pure checks, table-driven: quota, queue, then placement (cluster, fragmentation, topology)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from trainyard.capacity.fit import (FITS, REFUSED, WAITS, check_placement, check_queue, check_quota, exit_code, fit,
                                    gang_from_objects, job_refusal_hint, jobs_of, pack, priority_note)
from trainyard.scheduling.cluster_state import nodes_from, queue_uses

from capacity_builders import FOUR, GPU, built, node, pod, pod_group, queue, quota

RACK1 = {"mode": "hard", "highestTierAllowed": 1}


def test_gang_from_the_built_objects():
    gang = gang_from_objects(built(3, 8, topology=RACK1, priority="high"))
    assert (gang.namespace, gang.name, gang.queue, gang.priority_class, gang.min_member) == ("ns", "tj", "team-a", "high", 3)
    assert gang.pods == [{GPU: Fraction(8)}] * 3 and gang.total == {GPU: Fraction(24)}
    assert gang.min_resources == {GPU: Fraction(24)} and gang.topology == RACK1


def test_the_jobs_the_jobset_controller_will_create_are_its_replicated_jobs():
    objects = built(3, 8)
    jobs = jobs_of(objects)
    template = objects[-1]["spec"]["replicatedJobs"][0]["template"]
    assert [(j["kind"], j["metadata"]["name"], j["metadata"]["namespace"]) for j in jobs] == [("Job", "tj-node-0", "ns")]
    assert jobs[0]["spec"] == template["spec"] and jobs[0]["spec"] is not template["spec"]  # a copy: dry-run pops
    assert jobs_of(objects[:1]) == []  # no JobSet, no Job


@pytest.mark.parametrize("refusal, hint", [
    ('Job.batch "tj-node-0" is invalid: spec.template.spec.containers[0].resources.requests: Invalid value: "1": '
     "must be equal to nvidia.com/gpu limit of 2", "set spec.trainer.resourcesPerNode.requests equal to its limits"),
    ('jobs.batch is forbidden: exceeded quota: count/jobs.batch', None),
])
def test_a_refused_job_names_the_fix_it_has(refusal, hint):
    found = job_refusal_hint(refusal)
    assert (hint in found) if hint else found == ""


def _without_group(objects, scheduler=None, queue_annotation=None):
    jobset = objects[-1]
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    if scheduler:
        template["spec"]["schedulerName"] = scheduler
    template["metadata"] = {"annotations": {"scheduling.volcano.sh/queue-name": queue_annotation}} if queue_annotation else {}
    return [jobset]


@pytest.mark.parametrize("objects,in_volcano,queue,text", [
    (built(2, 8), True, "team-a", "queue team-a"),
    (built(2, 8, queue_name=None), True, None, "queue default"),  # Volcano's CRD default
    (_without_group(built(2, 8)), False, None,
     "no Volcano queue (no Volcano PodGroup: pods are placed by their own scheduler)"),
    (_without_group(built(2, 8), scheduler="default-scheduler"), False, None,
     "no Volcano queue (no Volcano PodGroup: pods are placed by their own scheduler)"),
    # Volcano's pods without a gang: one-pod groups in the pods' queue
    (_without_group(built(2, 8), scheduler="volcano", queue_annotation="team-b"), True, "team-b", "queue team-b"),
])
def test_the_gang_names_the_queue_the_pods_will_really_wait_in(objects, in_volcano, queue, text):
    gang = gang_from_objects(objects)
    assert (gang.in_volcano, gang.queue, gang.queue_text) == (in_volcano, queue, text)


def test_no_volcano_queue_is_checked_for_pods_volcano_never_sees():
    gang = gang_from_objects(_without_group(built(2, 8)))
    closed = {"default": queue_uses([queue("default", capability=32, state="Closed")], [], [], {})["default"]}
    nodes = nodes_from([node(f"n{i}", 8) for i in range(2)], [], [])
    assert [v.check for v in fit(gang, [], closed, nodes)] == ["placement"]
    volcano_gang = gang_from_objects(built(2, 8, queue_name="default"))
    assert fit(volcano_gang, [], closed, nodes)[-1].check == "queue"


def test_jobs_outside_a_volcano_gang_are_not_placed_with_it():
    """A staged job (the initializers, see controller/plugins/tenancy.py) has no group name: it runs in
    one-pod groups before the gang, so the gang's fit is its members' alone."""
    objects = built(2, 8)
    jobs = objects[-1]["spec"]["replicatedJobs"]
    jobs.insert(0, {"name": "model-initializer", "replicas": 1, "template": {"spec": {"template": {
        "metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "team-a"}},
        "spec": {"containers": [{"name": "init", "resources": {"requests": {"cpu": "4"}}}]}}}}})
    gang = gang_from_objects(objects)
    assert gang.pods == [{GPU: Fraction(8)}] * 2 and gang.queue == "team-a"


def test_a_volcano_pod_without_a_gang_counts_in_the_queue_it_names():
    """Volcano gives such a pod a one-pod group in the queue of its annotation (`default` when it names none)."""
    named = pod("init", "n0", 8, scheduler="volcano")
    named["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "team-a"}
    uses = queue_uses([queue("team-a", capability=32), queue("default")], [], [named, pod("x", "n1", 8, scheduler="volcano")])
    assert uses["team-a"].allocated == {GPU: Fraction(8)} and uses["default"].allocated == {GPU: Fraction(8)}


def test_no_jobset_is_an_error():
    with pytest.raises(ValueError, match="builds no JobSet"):
        gang_from_objects([])


@pytest.mark.parametrize("quotas,expected", [
    ([], None),
    ([quota("q", {f"requests.{GPU}": 32}, {f"requests.{GPU}": 8})], None),
    ([quota("q", {f"requests.{GPU}": 24}, {f"requests.{GPU}": 16})],
     (WAITS, f"quota q in ns requests.{GPU} 24, used 16, this job needs 16")),
    ([quota("q", {f"requests.{GPU}": 8})], (REFUSED, f"quota q in ns allows requests.{GPU} 8, this job needs 16: it can never start")),
    ([quota("q", {"pods": 1})], (REFUSED, "quota q in ns allows pods 1, this job needs 2: it can never start")),
    ([quota("q", {f"requests.{GPU}": 8}, ns="other")], None),
    ([quota("scoped", {f"requests.{GPU}": 0}, scope={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["low"]}]})], None),
    ([quota("scoped", {f"requests.{GPU}": 0}, scope={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["low"]}]})],
     (REFUSED, f"quota scoped in ns allows requests.{GPU} 0, this job needs 16: it can never start")),
], ids=["none", "room", "used-up", "hard", "pods", "other-namespace", "scope-not-matching", "scope-matching"])
def test_quota(quotas, expected):
    verdict = check_quota(gang_from_objects(built(2, 8)), quotas)
    assert (verdict and (verdict.outcome, verdict.message)) == expected


@pytest.mark.parametrize("queues,pods,groups,expected", [
    ([queue("team-a", capability=32)], [], [], None),
    ([queue("team-a", capability=32)], [pod("a", "n0", 8, group="g1"), pod("b", "n1", 8, group="g1"),
                                        pod("c", "n2", 8, group="g1")], [pod_group("g1", "team-a", 24, 3)],
     (WAITS, f"queue team-a capability {GPU} 32, allocated 24, this job needs 16")),
    ([queue("team-a", capability=32)], [pod("a", "n0", 8, group="g1")],
     [pod_group("g1", "team-a", 8), pod_group("g2", "team-a", 16, 2, phase="Inqueue")],
     (WAITS, f"queue team-a capability {GPU} 32, allocated 8, admitted gangs hold 16 more, this job needs 16")),
    # the hold's pod is bound but Volcano has not yet moved its group past Inqueue: counted once, as allocated
    ([queue("team-a", capability=16)], [pod("a", "n0", 8, group="hold")],
     [pod_group("hold", "team-a", 8, phase="Inqueue")],
     (WAITS, f"queue team-a capability {GPU} 16, allocated 8, this job needs 16")),
    ([queue("team-a", capability=32)], [pod("a", "n0", 8, group="g1", phase="Succeeded")],
     [pod_group("g1", "team-a", 8)], None),  # finished pods hold nothing
    ([queue("team-a")], [pod("a", "n0", 8), pod("b", "n1", 8), pod("c", "n2", 8, scheduler="volcano")], [], None),
    ([queue("team-a", capability=32, state="Closed")], [], [], (WAITS, "queue team-a is Closed, it admits no new gang")),
    ([queue("team-b")], [], [], (REFUSED, "queue team-a does not exist")),
], ids=["room", "full", "inqueue-reserved", "bound-but-still-inqueue", "finished", "no-capability", "closed",
        "missing"])
def test_queue(queues, pods, groups, expected):
    uses = queue_uses(queues, groups, pods)
    verdict = check_queue(gang_from_objects(built(2, 8)), uses.get("team-a"), {GPU: Fraction(32)})
    assert (verdict and (verdict.outcome, verdict.message)) == expected


def test_queue_without_capability_is_bounded_by_the_cluster():
    uses = queue_uses([queue("team-a")], [pod_group("g", "team-a", 24, 3)],
                      [pod(f"p{i}", f"n{i}", 8, group="g") for i in range(3)])
    verdict = check_queue(gang_from_objects(built(2, 8)), uses["team-a"], {GPU: Fraction(32)})
    assert verdict.message == f"queue team-a cluster total {GPU} 32, allocated 24, this job needs 16"


@pytest.mark.parametrize("busy,pods,gpus,topology,outcome,check,message", [
    ([], 2, 8, None, FITS, "placement", "fits now: n0 1 pod, n1 1 pod"),
    ([("n0", 4)], 1, 4, None, FITS, "placement", "fits now: n0 1 pod"),  # best fit: the fullest node that fits
    ([("n0", 8), ("n1", 8), ("n2", 8)], 2, 8, None, WAITS, "cluster",
     f"the cluster has 8 free {GPU}, this job needs 16 (2 pods)"),
    ([("n0", 4), ("n1", 4), ("n2", 4), ("n3", 4)], 2, 8, None, WAITS, "fragmentation",
     f"fragmented: 16 free {GPU} in total, enough for this job's 16, but no set of nodes hosts its 2 pods of up to "
     f"8 {GPU} (free per node: n0 4, n1 4, n2 4, n3 4)"),
    ([("n0", 4), ("n2", 4)], 2, 8, RACK1, WAITS, "topology",
     f"topology: the gang must fit in one rack (networkTopology hard, highestTierAllowed 1) and none has room for "
     f"its 2 pods of up to 8 {GPU} (free per rack: rack-0 12, rack-1 12; the cluster as a whole could host it)"),
    ([("n0", 4)], 2, 8, RACK1, FITS, "placement", "fits in rack rack-1: n2 1 pod, n3 1 pod"),
    ([("n0", 4), ("n2", 4)], 2, 8, {"mode": "hard", "highestTierAllowed": 2}, FITS, "placement",
     "fits in spine spine-0: n1 1 pod, n3 1 pod"),
    ([("n0", 4), ("n2", 4)], 2, 8, {"mode": "soft", "highestTierAllowed": 1}, FITS, "placement",
     "fits now: n1 1 pod, n3 1 pod"),
    ([], 1, 16, None, REFUSED, "node size",
     f"a pod of this job needs 16 {GPU} and the largest node, n0, has 8 allocatable: it can never start; "
     "use more, smaller pods (numNodes)"),
    ([("n0", 8), ("n1", 8), ("n2", 8), ("n3", 8)], 1, 9, RACK1, REFUSED, "node size",
     f"a pod of this job needs 9 {GPU} and the largest node, n0, has 8 allocatable: it can never start; "
     "use more, smaller pods (numNodes)"),
    # what no amount of waiting fixes
    ([], 5, 8, None, REFUSED, "cluster",
     f"even with every node free the cluster (32 {GPU} allocatable) cannot host its 5 pods of up to 8 {GPU}: it can "
     "never start; use fewer or smaller pods"),
    ([("n0", 8)], 3, 8, RACK1, REFUSED, "topology",
     f"topology: no rack could ever hold its 3 pods of up to 8 {GPU} (networkTopology hard, highestTierAllowed 1; "
     f"{GPU} allocatable per rack: rack-0 16, rack-1 16): it can never start; allow a higher tier or use fewer GPUs"),
    ([], 3, 8, {"mode": "soft", "highestTierAllowed": 1}, FITS, "placement", "fits now: n0 1 pod, n1 1 pod, n2 1 pod"),
], ids=["empty", "best-fit", "cluster-full", "fragmented", "topology", "topology-fits", "spine", "soft-topology",
        "pod-larger-than-every-node", "larger-than-every-node-on-a-full-cluster", "larger-than-the-cluster",
        "larger-than-every-rack", "soft-topology-larger-than-a-rack"])
def test_placement(busy, pods, gpus, topology, outcome, check, message):
    nodes = nodes_from(FOUR, [pod(f"b{i}", name, n) for i, (name, n) in enumerate(busy)])
    verdict = check_placement(gang_from_objects(built(pods, gpus, topology=topology)), nodes)
    assert (verdict.outcome, verdict.check, verdict.message) == (outcome, check, message)


def test_pack_skips_unready_and_cordoned_nodes():
    nodes = nodes_from([node("a", "r", ready=False), node("b", "r", cordoned=True), node("c", "r")], [])
    assert pack([{GPU: Fraction(8)}], nodes) == {"c": 1}
    assert pack([{GPU: Fraction(8)}] * 2, nodes) is None


def test_racks_from_hypernodes_override_labels():
    hyper = [{"metadata": {"name": "hn-a"}, "spec": {"tier": 1, "members": [
                 {"type": "Node", "selector": {"exactMatch": {"name": "n0"}}},
                 {"type": "Node", "selector": {"exactMatch": {"name": "n2"}}}]}},
             {"metadata": {"name": "hn-b"}, "spec": {"tier": 1, "members": [
                 {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"trainyard.dev/rack": "rack-0"}}}}]}},
             {"metadata": {"name": "top"}, "spec": {"tier": 2, "members": [
                 {"type": "HyperNode", "selector": {"exactMatch": {"name": "hn-a"}}}]}}]
    nodes = {n.name: (n.rack, n.spine) for n in nodes_from(FOUR, [], hyper)}
    assert nodes["n2"] == ("hn-a", "top") and nodes["n1"] == ("hn-b", "spine-0") and nodes["n3"] == ("rack-1", "spine-0")


@pytest.mark.parametrize("quotas,capability,busy,check,code", [
    ([quota("q", {f"requests.{GPU}": 8})], 32, [], "quota", 2),
    ([quota("q", {f"requests.{GPU}": 64}, {f"requests.{GPU}": 56})], 32, [], "quota", 1),
    ([], 8, [], "queue", 2),  # beyond the queue's capability: never
    ([], 32, [("n0", 8), ("n1", 8), ("n2", 8)], "cluster", 1),
    ([], 32, [], "placement", 0),
], ids=["quota-refused", "quota-waits", "queue-refused", "cluster-waits", "fits"])
def test_first_blocking_check_wins_and_sets_the_exit_code(quotas, capability, busy, check, code):
    nodes = nodes_from(FOUR, [pod(f"b{i}", name, n, ns="x") for i, (name, n) in enumerate(busy)])
    verdicts = fit(gang_from_objects(built(2, 8)), quotas, queue_uses([queue("team-a", capability)], [], []), nodes)
    assert verdicts[-1].check == check and exit_code(verdicts[-1]) == code


@pytest.mark.parametrize("priority,groups,expected", [
    (None, [], "priority (none) = 0; no gang waits in queue team-a"),
    ("high", [pod_group("w1", "team-a", 8, phase="Pending")],
     "priority high = 100; 1 gang(s) wait in queue team-a, 1 of them at this priority or above (they go first)"),
    ("low", [pod_group("w1", "team-a", 8, phase="Pending"), pod_group("w2", "team-a", 8, phase="Inqueue"),
             pod_group("w3", "team-a", 8, phase="Pending"), pod_group("r", "team-a", 8, running=1)],
     "priority low = 1; 3 gang(s) wait in queue team-a, 2 of them at this priority or above (they go first)"),
], ids=["alone", "high-first", "low-behind"])
def test_priority_note(priority, groups, expected):
    gang = gang_from_objects(built(2, 8, priority=priority))
    for group, klass in zip(groups, ("high", "low")):  # w1 high, w2 low, w3 none
        group["spec"]["priorityClassName"] = klass
    use = queue_uses([queue("team-a", 32)], groups, [])["team-a"]
    assert priority_note(gang, use, {"high": 100, "low": 1}) == expected


def test_a_pod_larger_than_every_node_exits_2():
    nodes = nodes_from(FOUR, [])
    verdict = fit(gang_from_objects(built(1, 16)), [], queue_uses([queue("team-a")], [], [], {}), nodes)[-1]
    assert verdict.outcome == REFUSED and exit_code(verdict) == 2 and "can never start" in verdict.line
