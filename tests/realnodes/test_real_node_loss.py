"""A real node dies mid-training (`trainyard cluster node-down`: its kubelet, containerd and every container of its
pods killed at once) under a 2-node torch TrainJob whose JobSet may restart twice:

- the rank left alone fails as its collective breaks, and JobSet's failure policy restarts the whole gang;
- the node turns NotReady, the TrainJob gets a NodeLost Event, and the report counts none of the GPUs its pod
  there held, nor offers the node's;
- the restarted gang cannot re-form on one real node: it waits, its pod on the live node not bound half a gang;
- the node comes back (`node-up`, Ready with its labels and GPUs), the gang runs there and the TrainJob completes.
"""

from __future__ import annotations

import time

import pytest

from trainyard.capacity import live
from trainyard.capacity.report import build_report
from trainyard.cluster.real_node_spec import real_node_name
from realcluster import NAME, trainyard
from test_real_failures import jobset_of, real_trainjob, restartable_runtime  # noqa: F401 (a fixture)
from test_real_training import finished, logs, pods_of, submit
from waiting import wait_for

pytestmark = pytest.mark.integration

ENV = {"TRAIN_STEPS": "300", "STEP_SECONDS": "0.5", "CHECKPOINT_EVERY": "100000", "DIST_TIMEOUT_S": "30"}


def node_ready(cluster, node: str) -> str:
    found = cluster.get("node", node) or {}
    return next((c["status"] for c in (found.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), "")


def test_a_real_node_dying_mid_training_restarts_the_gang_by_policy_once_it_is_back(real_cluster,
                                                                                   restartable_runtime):  # noqa: F811
    document = real_trainjob(restartable_runtime, ["torchrun", "/opt/trainyard/scripts/torch_checkpointed_sgd.py"])
    document["spec"]["trainer"]["env"] += [{"name": k, "value": v} for k, v in ENV.items()]
    name = submit(real_cluster, document)

    def training() -> list[dict] | None:
        pods = pods_of(real_cluster, name)
        rank0 = next((p for p in pods if p["metadata"]["name"].startswith(f"{name}-node-0-0-")), None)
        text = logs(real_cluster, rank0["metadata"]["name"], missing_ok=True) if rank0 and len(pods) == 2 else None
        return pods if text and "step 3 " in text else None  # rank 0 prints the steps

    first = wait_for(training, 240, "the TrainJob training on both real nodes", 2, error=None)
    assert first, [p["status"] for p in pods_of(real_cluster, name)]
    # the node of rank 1 dies: rank 0 is left alone
    victim = next(p["spec"]["nodeName"] for p in first if p["metadata"]["name"].startswith(f"{name}-node-0-1-"))
    assert victim in {real_node_name(0), real_node_name(1)}
    down = trainyard("cluster", "node-down", victim, "--name", NAME, timeout=120)
    restarted = False
    try:
        assert down.returncode == 0, down.stdout + down.stderr
        killed_at = time.monotonic()
        # the rank left alone fails with its collective; the failure policy restarts the gang
        assert wait_for(lambda: (jobset_of(real_cluster, name).get("status") or {}).get("restarts") == 1, 180,
                        "JobSet's first restart", 2, error=None), jobset_of(real_cluster, name).get("status")
        assert wait_for(lambda: node_ready(real_cluster, victim) not in ("True", ""), 150, f"{victim} NotReady", 2,
                        error=None)
        lost_after = time.monotonic() - killed_at

        def node_lost_event():
            events = real_cluster.items("events", "-n", "team-a", "--field-selector",
                                        f"involvedObject.name={name},reason=NodeLost")
            return events[0] if events else None

        event = wait_for(node_lost_event, 60, "the NodeLost Event", 2, error=None)
        assert event and victim in event["message"] and "restarts used" in event["message"], event

        report = build_report(live.snapshot(live.connect(str(real_cluster.kubeconfig))))
        row = next(r for r in report.nodes if r["node"] == victim)
        assert row["lost"] and row["allocated"] == 0 and row["free"] == 0, row
        on_victim = [p for p in pods_of(real_cluster, name) if p["spec"].get("nodeName") == victim
                     and not p["metadata"].get("deletionTimestamp")]
        assert all(p["metadata"]["uid"] in {f["metadata"]["uid"] for f in first} for p in on_victim), \
            "nothing new is bound to the lost node"

        # one real node cannot hold the restarted gang: it waits whole, no member bound on its own
        time.sleep(10)
        old = {f["metadata"]["uid"] for f in first}
        fresh = [p for p in pods_of(real_cluster, name) if p["metadata"]["uid"] not in old]
        bound = [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in fresh if p["spec"].get("nodeName")]
        assert not bound, ("a member of a gang that needs both real nodes bound on its own", bound)
    finally:
        up = trainyard("cluster", "node-up", victim, "--name", NAME, timeout=300)
        assert up.returncode == 0, up.stdout + up.stderr
        restarted = True
    assert restarted and node_ready(real_cluster, victim) == "True"
    node = real_cluster.get("node", victim)
    assert node["status"]["allocatable"]["nvidia.com/gpu"] != "0", "its GPUs are advertised again"
    condition = finished(real_cluster, name, 420)
    assert condition["type"] == "Complete", condition
    assert jobset_of(real_cluster, name)["status"].get("restarts") == 1
    print(f"\n{victim} killed: NotReady after {lost_after:.0f} s; the gang restarted once and completed after it "
          "came back")
