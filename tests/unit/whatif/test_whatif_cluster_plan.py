"""What the cluster engine builds for a stack: a cluster of its shape, nodes in the model's racks and spines, the
platform's own tenant objects, TrainJobs as tenants submit them, and time compressed then restored."""

import pytest
import yaml

from trainyard import k8s as K
from trainyard.paths import repo_root
from trainyard.scheduling.records import PodRecord
from trainyard.scheduling.trace import TraceJob
from trainyard.whatif.cluster_plan import EngineLimit, compressed, expanded, plan, submission
from trainyard.whatif.scenario import scenario

from stackfiles import config, edited, local_document, tenants


def kinds(objects) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for obj in objects:
        out.setdefault(obj["kind"], set()).add(obj["metadata"]["name"])
    return out


def test_the_local_stack_becomes_a_cluster_of_its_shape_with_its_tenants_queues_quotas_and_classes(tmp_path):
    stack = config(local_document(), tmp_path)
    built = plan(stack, port_base=30100)
    assert (built.spec.nodes, built.spec.gpus_per_node, built.spec.port_base) == (4, 8, 30100)
    assert built.spec.reclaim == "none" and built.spec.timed_pods
    model = scenario(stack).nodes
    assert {node: (labels[K.RACK_LABEL], labels[K.SPINE_LABEL]) for node, labels in built.node_labels.items()} == {
        n.name: (n.rack, n.spine) for n in model}
    found = kinds(built.objects)
    assert found["Queue"] >= {"team-a", "team-b"}
    assert found["Namespace"] >= {"team-a", "team-b"}
    assert found["PriorityClass"] >= {"team-a-default", "team-b-default", "training-high"}
    assert found["HyperNode"] == {"rack-0", "rack-1", "spine-0"}
    assert "ResourceQuota" in found and "ClusterTrainingRuntime" in found
    queues = {o["metadata"]["name"]: o["spec"] for o in built.objects if o["kind"] == "Queue"}
    assert queues["team-a"]["weight"] == tenants(local_document())["team-a"]["queue"]["weight"]
    assert built.scheduler == stack.scheduler
    assert built.namespaces == {t.name: t.namespace for t in stack.tenants}


@pytest.mark.parametrize("reclaim, expected", [("fair-sharing", "fair-sharing"), ("none", "none")])
def test_the_controllers_reclaim_runs_as_the_stack_runs_it(tmp_path, reclaim, expected):
    prod = yaml.safe_load((repo_root() / "stacks" / "Pulumi.prod.yaml").read_text())

    def change(doc):
        doc["config"]["trainyard:controller"]["reclaim"] = reclaim
    built = plan(config(edited(prod, change), tmp_path))
    assert built.spec.reclaim == expected
    assert any("reclaim" in note for note in built.notes) == (expected != "none")


def test_racks_naming_their_nodes_are_refused_naming_the_field(tmp_path):
    def named(doc):
        doc["config"]["trainyard:topology"]["racks"] = [{"name": "r1", "spine": "s1", "nodes": ["x", "y"]},
                                                        {"name": "r2", "spine": "s1"}]
    with pytest.raises(EngineLimit, match=r"topology.racks\[0\].nodes.*--engine model"):
        plan(config(edited(local_document(), named), tmp_path))


def test_a_job_is_a_trainjob_in_its_tenants_namespace_naming_its_priority_class():
    job = TraceJob("j0001", "team-a", arrival=3.0, duration=40.0, pods=2, gpus_per_pod=8, tier=1,
                   priority_class="training-high")
    made = submission(job, {"team-a": "ns-a"})
    assert made["kind"] == "TrainJob" and made["metadata"]["namespace"] == "ns-a"
    assert made["metadata"]["labels"][K.PRIORITY_CLASS_LABEL] == "training-high"
    assert made["spec"]["trainer"]["numNodes"] == 2
    assert made["spec"]["runtimeRef"]["name"] == "trace-tier1"
    plain = submission(TraceJob("j2", "team-b", 0.0, 10.0, 1, 4, None), {})
    assert plain["metadata"]["namespace"] == "team-b" and K.PRIORITY_CLASS_LABEL not in plain["metadata"]["labels"]


def test_time_is_compressed_for_the_cluster_and_restored_for_the_figures():
    trace = [TraceJob("a", "t", 100.0, 60.0, 1, 8, None), TraceJob("b", "t", 0.0, 8.0, 2, 8, 1)]
    fast = compressed(trace, 4)
    assert [(j.arrival, j.duration) for j in fast] == [(25.0, 15.0), (0.0, 2.0)]
    submitted, pods, end = expanded({"a": 25.5}, [PodRecord("a", 8, "n", bound=26.0, ended=None)], 50.0, 4)
    assert submitted == {"a": 102.0} and end == 200.0
    assert (pods[0].bound, pods[0].ended, pods[0].node) == (104.0, None, "n")


@pytest.mark.parametrize("raised, words", [
    ('(404)\nReason: Not Found\nHTTP response body: {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
     '"message":"namespaces \\"team-c\\" not found","reason":"NotFound","code":404}\n\n',
     'namespaces "team-c" not found'),
    ('(403)\nHTTP response body: {"message":"admission webhook \\"validator.trainer.trainyard.dev\\" denied the request: '
     'metadata.labels[trainyard.dev/priority-class]: Unsupported value","code":403}',
     'admission webhook "validator.trainer.trainyard.dev" denied the request: '
     'metadata.labels[trainyard.dev/priority-class]: Unsupported value'),
    ("connection refused", "connection refused"),
])
def test_a_refusal_is_reported_in_the_api_servers_words(raised, words):
    from trainyard.whatif.cluster_engine import server_words

    assert server_words(raised) == words
