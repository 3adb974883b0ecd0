"""Where a gang's pods may go (pure, table-driven): nodeSelector, required node affinity and tolerations as the
scheduler's predicates read them; reclaim frees only nodes the gang may use."""

from fractions import Fraction

import pytest

from trainyard import k8s as K
from trainyard.scheduling.cluster_state import GPU, Node
from trainyard.scheduling.placement import ANYWHERE, gang_placement, placement_of
from trainyard.scheduling.reclaim import RunningJob, plan
from trainyard.scheduling.reservation import WaitingGang, cheapest_nodes

H100 = {"gpu.product": "H100", "zone": "z1", "gen": "9"}
A100 = {"gpu.product": "A100", "zone": "z2", "gen": "8"}
NO_SCHEDULE = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}


def affinity(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize("spec, name, labels, taints, allowed", [
    ({}, "n", A100, (), True),
    ({"nodeSelector": {"gpu.product": "H100"}}, "n", H100, (), True),
    ({"nodeSelector": {"gpu.product": "H100"}}, "n", A100, (), False),
    ({"affinity": affinity({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]})}, "n", H100, (), True),
    ({"affinity": affinity({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]})}, "n", A100, (), False),
    # terms are ORed, expressions ANDed
    ({"affinity": affinity({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]},
                           {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["8"]},
                                                 {"key": "zone", "operator": "Exists"}]})}, "n", H100, (), True),
    ({"affinity": affinity({"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["8"]}]})}, "n", A100, (), False),
    ({"affinity": affinity({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z2"]}]})}, "n", A100, (), False),
    ({"affinity": affinity({"matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]})}, "n", A100, (), True),
    ({"affinity": affinity({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})}, "n2", A100, (), False),
    ({"affinity": affinity({})}, "n", A100, (), False),  # an empty term matches no node
    # taints: NoSchedule/NoExecute need a toleration; PreferNoSchedule and the platform's own hold do not
    ({}, "n", A100, (NO_SCHEDULE,), False),
    ({}, "n", A100, ({**NO_SCHEDULE, "effect": "PreferNoSchedule"},), True),
    ({}, "n", A100, ({"key": K.RESERVATION_TAINT, "value": "x", "effect": "NoSchedule"},), True),
    ({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infer"}]}, "n", A100, (NO_SCHEDULE,), True),
    ({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "train"}]}, "n", A100, (NO_SCHEDULE,), False),
    ({"tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]}, "n", A100, (NO_SCHEDULE,), False),
    ({"tolerations": [{"operator": "Exists"}]}, "n", A100, (NO_SCHEDULE,), True),
])
def test_a_node_suits_a_pod_spec_as_the_scheduler_reads_it(spec, name, labels, taints, allowed):
    assert placement_of([spec]).allows(name, labels, taints) is allowed


def jobset(*specs_and_gpus):
    return {"spec": {"replicatedJobs": [
        {"name": f"j{i}", "template": {"spec": {"template": {"spec": {**spec, "containers": [
            {"name": "c", "resources": {"limits": {K.GPU_RESOURCE: str(gpus)}} if gpus else {}}]}}}}}
        for i, (spec, gpus) in enumerate(specs_and_gpus)]}}


def test_only_the_gpu_pods_of_a_jobset_constrain_its_gang():
    placement = gang_placement(jobset(({"nodeSelector": {"role": "cpu"}}, 0), ({"nodeSelector": {"gpu.product": "H100"}}, 8)))
    assert placement.allows("n", H100, ()) and not placement.allows("n", A100, ())
    assert gang_placement(jobset(({"nodeSelector": {"role": "cpu"}}, 0))) == ANYWHERE
    assert gang_placement({"spec": {}}) == ANYWHERE


def node(name, labels, used):
    return Node(name=name, rack="r0", spine="s0", allocatable={GPU: Fraction(8)}, used={GPU: Fraction(used)},
                labels=labels)


def test_reclaim_never_evicts_from_nodes_the_gang_cannot_use():
    """The attack found: a gang asking for H100 nodes got A100 nodes freed, their job's work lost for nothing."""
    nodes = [node("a100-0", A100, 8), node("a100-1", A100, 8), node("h100-0", H100, 8), node("h100-1", H100, 8)]
    running = [RunningJob(("other", "on-a100"), "lender", Fraction(16), frozenset({"a100-0", "a100-1"}), 10.0),
               RunningJob(("other", "on-h100"), "lender", Fraction(16), frozenset({"h100-0", "h100-1"}), 500.0)]
    allocated, deserved = {"lender": Fraction(32), "poor": Fraction(0)}, {"lender": Fraction(0), "poor": Fraction(16)}
    anywhere = WaitingGang(("team-a", "g"), "poor", 2, Fraction(8), None, 60.0)
    picky = WaitingGang(("team-a", "g"), "poor", 2, Fraction(8), None, 60.0,
                        placement_of([{"nodeSelector": {"gpu.product": "H100"}}]))
    assert plan(nodes, [anywhere], running, allocated, deserved, 10).victims == (("other", "on-a100"),)  # least work
    assert plan(nodes, [picky], running, allocated, deserved, 10).victims == (("other", "on-h100"),)
    nowhere = WaitingGang(("team-a", "g"), "poor", 2, Fraction(8), None, 60.0,
                          placement_of([{"nodeSelector": {"gpu.product": "B200"}}]))
    assert plan(nodes, [nowhere], running, allocated, deserved, 10) is None
    assert cheapest_nodes(nodes, picky) == ("h100-0", "h100-1")
