"""Reclaim reads a waiting gang's real node constraints from its JobSet on the API server (the TrainJob's
podTemplateOverrides merged by the controller), so no plan frees nodes the gang's pods could not use."""

from __future__ import annotations

import pytest

from trainyard.capacity import live
from trainyard.scheduling.cluster_state import nodes_from
from trainyard.capacity.reclaimer import Reclaimer

from builders import new_trainjob, tenant_spec
from tenant_helpers import add_tenant, create, jobset, remove_tenant

pytestmark = pytest.mark.integration

PRODUCT = "trainyard.dev/test-gpu-product"


def test_the_reclaimer_takes_a_gangs_node_selector_and_tolerations_from_its_jobset(cluster, shared, catalog_runtime):
    tenant = add_tenant(cluster, tenant_spec(gpus=16))
    try:
        picky = new_trainjob("picky", catalog_runtime, namespace=tenant.ns, nodes=2, suspend=True,
                             podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "spec": {
                                 "nodeSelector": {PRODUCT: "B200"},
                                 "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "train",
                                                  "effect": "NoSchedule"}]}}])
        create(cluster, picky, as_user=tenant.user)
        cluster.wait(lambda: jobset(cluster, "picky", tenant.ns), what="the TrainJob's JobSet")
        api = live.connect(cluster.kubeconfig)
        reclaimer = Reclaimer(api)
        trainjobs = live.list_items(api, live.TRAINJOBS)
        placement = reclaimer.placement((tenant.ns, "picky"), trainjobs)
        nodes = nodes_from(live.list_items(api, live.NODES), [])
        assert nodes and not any(placement.allows(n.name, n.labels, n.taints) for n in nodes)  # no B200 node here
        b200 = {**nodes[0].labels, PRODUCT: "B200"}
        assert placement.allows("x", b200, ())
        assert placement.allows("x", b200, ({"key": "dedicated", "value": "train", "effect": "NoSchedule"},))
        assert not placement.allows("x", b200, ({"key": "dedicated", "value": "infer", "effect": "NoSchedule"},))
        # read once per TrainJob generation: a second round asks the API server nothing new
        assert reclaimer.placement((tenant.ns, "picky"), trainjobs) is placement
        assert reclaimer.placement((tenant.ns, "no-such-gang"), trainjobs).allows("x", {}, ())  # no JobSet: anywhere
    finally:
        remove_tenant(cluster, tenant.spec)
