"""Tenant namespaces: queue and priority defaulting in the build, queue/priority admission at TrainJob create."""

from functools import partial

import pytest

from trainyard.controller.admission import admission_review_response, validate_trainjob
from trainyard.controller.build import build_objects
from trainyard.controller.tenant_namespace import tenant_policy

from builders import tenant_namespace
from ctl_builders import by_kind, fixed_key, job, runtime, the_jobset, trainjob

QUEUE = "scheduling.volcano.sh/queue-name"
PRIO = "trainyard.dev/priority-class"


team_a_ns = partial(tenant_namespace, queue="team-a", granted="team-a-default,training-high", default="team-a-default",
                    annotations={})
"""Team a's Namespace: its queue, two classes granted, one the default (the annotations there even when empty)."""


def priority_class(name):
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": 1}


def volcano_runtime(annotations=None, kind="ClusterTrainingRuntime", **pod):
    return runtime(jobs=[job("node", "trainer", **pod)], ml={"torch": {}}, pod_group={"volcano": {}},
                   annotations=annotations, kind=kind)


def labelled(tj, **labels):
    tj["metadata"]["labels"] = labels
    return tj


def patch_annotations(annotations, manager="example.com/user"):
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"metadata": {"annotations": annotations}}}}


def build(tj, rt, *existing):
    objects = build_objects(tj, rt, list(existing), key_generator=fixed_key)
    (pg,) = by_kind(objects, "PodGroup")
    pods = [j["template"]["spec"]["template"]["spec"] for j in the_jobset(objects)["spec"]["replicatedJobs"]]
    return pg["spec"], [p.get("priorityClassName") for p in pods]


# ---- the namespace's policy ---------------------------------------------------------------------

@pytest.mark.parametrize("ns,queue,classes,default", [
    (team_a_ns(), "team-a", ("team-a-default", "training-high"), "team-a-default"),
    (team_a_ns(granted=" a , b ,", default=None), "team-a", ("a", "b"), None),
    (team_a_ns(queue=None, granted=None, default=None), None, None, None),
    (None, None, None, None),
])
def test_tenant_policy_from_namespace(ns, queue, classes, default):
    policy = tenant_policy(ns)
    assert (policy.queue, policy.priority_classes, policy.default_priority_class) == (queue, classes, default)


# ---- build: defaults and the priority label ------------------------------------------------------

@pytest.mark.parametrize("rt_annotations,tj_spec,labels,pod,expected", [
    # a catalog ClusterTrainingRuntime naming no queue or class: the namespace's queue and default class
    (None, {}, {}, {}, ("team-a", "team-a-default", ["team-a-default"])),
    # a TrainingRuntime pinning both: kept
    ({QUEUE: "team-a"}, {}, {}, {"priorityClassName": "team-a-default"}, ("team-a", "team-a-default", ["team-a-default"])),
    # the TrainJob's label replaces the runtime's class on the pods and hence on the PodGroup
    ({QUEUE: "team-a"}, {}, {PRIO: "training-high"}, {"priorityClassName": "team-a-default", "priority": 1000},
     ("team-a", "training-high", ["training-high"])),
    # a queue named by a runtime patch wins over the namespace default (admission decides if it is allowed)
    (None, {"runtimePatches": [patch_annotations({QUEUE: "other"})]}, {}, {}, ("other", "team-a-default", ["team-a-default"])),
])
def test_build_applies_namespace_defaults_and_priority_label(rt_annotations, tj_spec, labels, pod, expected):
    kind = "TrainingRuntime" if rt_annotations else "ClusterTrainingRuntime"
    tj = labelled(trainjob(kind=kind, trainer={"numNodes": 1}, **tj_spec), **labels)
    spec, pod_classes = build(tj, volcano_runtime(rt_annotations, kind=kind, **pod), team_a_ns())
    assert (spec.get("queue"), spec.get("priorityClassName"), pod_classes) == expected


def test_build_without_namespace_is_upstream_but_the_label_still_selects():
    spec, classes = build(trainjob(trainer={"numNodes": 1}), volcano_runtime())
    assert "queue" not in spec and "priorityClassName" not in spec and classes == [None]
    spec, classes = build(labelled(trainjob(trainer={"numNodes": 1}), **{PRIO: "training-high"}), volcano_runtime())
    assert spec["priorityClassName"] == "training-high" and classes == ["training-high"]


DEMOTED = {"trainyard.dev/budget-status": '{"period": "2026-11", "gpu_hours": 101, "budget": 100, "state": '
           '"exhausted", "since": "2026-11-27T12:00:00Z", "action": "demotePriority", "demote_to": "scavenger"}'}


@pytest.mark.parametrize("created,labels,status,expected", [
    # created after the budget ran out with demotePriority: the demoted class, even over the TrainJob's choice
    ("2026-11-27T12:00:00Z", {}, DEMOTED, "scavenger"),
    ("2026-11-27T13:00:00Z", {PRIO: "training-high"}, DEMOTED, "scavenger"),
    # created before: its own class (running gangs and those already waiting are not demoted)
    ("2026-11-27T11:59:59Z", {}, DEMOTED, "team-a-default"),
    ("2026-11-27T11:00:00Z", {PRIO: "training-high"}, DEMOTED, "training-high"),
    # a new period's status (no action): its own class again
    ("2026-11-27T13:00:00Z", {}, {"trainyard.dev/budget-status": DEMOTED["trainyard.dev/budget-status"].replace(
        '"action": "demotePriority", ', "")}, "team-a-default"),
    ("2026-11-27T13:00:00Z", {}, {"trainyard.dev/budget-status": "{broken"}, "team-a-default"),
])
def test_an_exhausted_budget_demotes_the_trainjobs_created_since(created, labels, status, expected):
    tj = labelled(trainjob(trainer={"numNodes": 1}), **labels)
    tj["metadata"]["creationTimestamp"] = created
    ns = team_a_ns()
    ns["metadata"]["annotations"].update(status)
    spec, classes = build(tj, volcano_runtime(), ns)
    assert (spec["priorityClassName"], classes) == (expected, [expected])


def test_default_class_fills_only_pod_templates_without_one():
    rt = runtime(jobs=[job("init", "dataset-initializer", [{"name": "dataset-initializer"}], priorityClassName="low"),
                       job("node", "trainer")], ml={"torch": {}}, pod_group={"volcano": {}})
    spec, classes = build(trainjob(trainer={"numNodes": 1}), rt, team_a_ns())
    assert classes == ["low", "team-a-default"] and spec["priorityClassName"] == "team-a-default"


# ---- admission ----------------------------------------------------------------------------------

QUEUE_HINT = '(the Volcano queue of namespace ns; name no queue to get it)'


@pytest.mark.parametrize("tj,rt,expected", [
    (trainjob(), volcano_runtime(), []),
    (trainjob(), volcano_runtime({QUEUE: "team-a"}), []),
    (trainjob(annotations={QUEUE: "team-b"}), volcano_runtime(),
     [f'spec.annotations[{QUEUE}]: Unsupported value: "team-b": supported values: "team-a" {QUEUE_HINT}']),
    (trainjob(runtimePatches=[patch_annotations({QUEUE: "team-a"}), patch_annotations({QUEUE: "team-b"}, "b.io/x")]),
     volcano_runtime(),
     [f'spec.runtimePatches[1].trainingRuntimeSpec.template.metadata.annotations[{QUEUE}]: Unsupported value: '
      f'"team-b": supported values: "team-a" {QUEUE_HINT}']),
    (trainjob(), volcano_runtime({QUEUE: "default"}),
     [f'spec.runtimeRef: Unsupported value: "default": supported values: "team-a" {QUEUE_HINT}']),
    (labelled(trainjob(), **{PRIO: "training-high"}), volcano_runtime(), []),
    (labelled(trainjob(), **{PRIO: "team-b-default"}), volcano_runtime(),
     [f'metadata.labels[{PRIO}]: Unsupported value: "team-b-default": supported values: "team-a-default", '
      '"training-high" (the priority classes namespace ns was granted)']),
    (trainjob(), volcano_runtime(priorityClassName="team-b-default"),
     ['spec.runtimeRef: Unsupported value: "team-b-default": the runtime\'s pods use priorityClassName '
      "'team-b-default', which namespace ns was not granted; select a granted class with the label "
      f'{PRIO} (supported values: "team-a-default", "training-high")']),
    # the label overrides the runtime's class, so only the label is checked
    (labelled(trainjob(), **{PRIO: "training-high"}), volcano_runtime(priorityClassName="team-b-default"), []),
])
def test_tenant_admission(tj, rt, expected):
    queues = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q}}
              for q in ("team-a", "team-b", "default")]
    classes = [priority_class(n) for n in ("training-high", "team-a-default", "team-b-default")]
    cluster = [team_a_ns(), *classes, *queues]
    result = validate_trainjob(tj, rt, cluster_objects=cluster)
    assert [str(e) for e in result.errors] == expected


def test_plain_namespace_only_requires_the_selected_class_to_exist():
    tj = labelled(trainjob(annotations={QUEUE: "default"}), **{PRIO: "nope"})
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}}
    errors = validate_trainjob(tj, volcano_runtime(), cluster_objects=[queue]).errors
    assert [str(e) for e in errors] == [f'metadata.labels[{PRIO}]: Invalid value: "nope": PriorityClass "nope" doesn\'t exist']
    assert validate_trainjob(tj, volcano_runtime(), cluster_objects=[queue, priority_class("nope")]).allowed


def test_admission_review_reads_the_namespace_and_refuses_another_tenants_queue():
    reads = []

    def lookup(kind, name, ns=None):
        reads.append((kind, name))
        return {"ClusterTrainingRuntime": volcano_runtime(), "Namespace": team_a_ns()}.get(kind)

    review = {"request": {"uid": "u1", "operation": "CREATE", "kind": {"kind": "TrainJob"},
                          "object": trainjob(annotations={QUEUE: "team-b"}, trainer={"numNodes": 1})}}
    response = admission_review_response(review, lookup)["response"]
    assert ("Namespace", "ns") in reads
    assert response["allowed"] is False
    assert f'spec.annotations[{QUEUE}]: Unsupported value: "team-b": supported values: "team-a"' \
        in response["status"]["message"]


def test_update_is_refused_only_for_what_it_introduces():
    """A TrainJob admitted before its namespace became a tenant can still be suspended; relabelling it cannot."""
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}}
    rt, cluster = volcano_runtime({QUEUE: "default"}), [team_a_ns(), priority_class("training-high"), queue]
    old = trainjob(suspend=False)
    assert not validate_trainjob(trainjob(suspend=False), rt, cluster_objects=cluster).allowed  # as a create
    assert validate_trainjob(trainjob(suspend=True), rt, old, cluster_objects=cluster).allowed
    relabelled = labelled(trainjob(suspend=True), **{PRIO: "team-b-default"})
    assert [e.field for e in validate_trainjob(relabelled, rt, old, cluster_objects=cluster).errors] == \
        [f"metadata.labels[{PRIO}]"]


# ---- every TrainJob in a tenant namespace is a Volcano gang in the tenant's queue ---------------

def _pods(objects):
    return [j["template"]["spec"]["template"]["spec"] for j in the_jobset(objects)["spec"]["replicatedJobs"]]


def gangless_runtime(**pod):
    return runtime(jobs=[job("launcher", None, schedulerName="default-scheduler"), job("node", "trainer", **pod)],
                   ml={"torch": {}})


@pytest.mark.parametrize("policy,ns,expected", [
    (None, team_a_ns(), {"volcano": {}}),
    ({}, team_a_ns(), {"volcano": {}}),
    ({"volcano": {"networkTopology": {"mode": "soft"}}}, team_a_ns(), {"volcano": {"networkTopology": {"mode": "soft"}}}),
    (None, team_a_ns(queue=None), None),
    (None, None, None),
    ({"coscheduling": {"scheduleTimeoutSeconds": 5}}, team_a_ns(queue=None), {"coscheduling": {"scheduleTimeoutSeconds": 5}}),
])
def test_tenant_pod_group_policy(policy, ns, expected):
    from trainyard.controller.tenant_namespace import tenant_pod_group_policy
    assert tenant_pod_group_policy(policy, ns) == expected


def test_a_gangless_runtime_in_a_tenant_namespace_builds_a_volcano_gang_of_every_pod_in_the_tenant_queue():
    objects = build_objects(trainjob(trainer={"numNodes": 2}), gangless_runtime(), [team_a_ns()], key_generator=fixed_key)
    (pg,) = by_kind(objects, "PodGroup")
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert (pg["spec"]["queue"], pg["spec"]["minMember"], pg["spec"]["priorityClassName"]) == ("team-a", 3, "team-a-default")
    for pod in _pods(objects):  # the launcher too: a gang member kube-scheduler placed would never count
        assert pod["schedulerName"] == "volcano"
    templates = [j["template"]["spec"]["template"]["metadata"] for j in the_jobset(objects)["spec"]["replicatedJobs"]]
    assert all(t["annotations"]["scheduling.k8s.io/group-name"] == "tj" for t in templates)


def test_outside_tenant_namespaces_a_gangless_runtime_stays_upstream():
    objects = build_objects(trainjob(trainer={"numNodes": 2}), gangless_runtime(), [team_a_ns(queue=None)],
                            key_generator=fixed_key)
    assert by_kind(objects, "PodGroup") == []
    assert [p.get("schedulerName") for p in _pods(objects)] == ["default-scheduler", None]


def test_coscheduling_in_a_tenant_namespace_is_refused_at_admission_and_in_the_build():
    from trainyard.controller.errors import ValidationError
    rt = runtime(jobs=[job("node", "trainer")], ml={"torch": {}}, pod_group={"coscheduling": {}})
    errors = validate_trainjob(trainjob(), rt, cluster_objects=[team_a_ns()]).errors
    assert [str(e) for e in errors] == [
        "spec.runtimeRef: Forbidden: the runtime's podGroupPolicy is coscheduling, which cannot honour the Volcano "
        "queue of tenant namespace ns; use podGroupPolicy.volcano (or none: tenant namespaces get a Volcano gang)"]
    with pytest.raises(ValidationError, match="coscheduling, which cannot honour"):
        build_objects(trainjob(trainer={"numNodes": 1}), rt, [team_a_ns()], key_generator=fixed_key)
    assert validate_trainjob(trainjob(), rt, cluster_objects=[team_a_ns(queue=None)]).allowed


# ---- a tenant's catalog pin holds for cluster runtimes too ---------------------------------------

def pinned_namespace(version="1.0.0"):
    ns = team_a_ns()
    ns["metadata"]["labels"]["trainyard.dev/catalog-version"] = version
    return ns


def catalog_runtime(kind="ClusterTrainingRuntime", version="1.2.0"):
    return volcano_runtime(kind=kind) | {"metadata": {"name": "rt", **({"namespace": "ns"} if kind == "TrainingRuntime" else {}),
                                                      "labels": {"trainyard.dev/catalog-version": version}}}


PIN = "spec.runtimeRef: Forbidden: namespace ns pins runtime catalog 1.0.0 and ClusterTrainingRuntime rt is from catalog 1.2.0: "


@pytest.mark.parametrize("rt,extra,expected", [
    # the pinned release has the runtime: its copy in the namespace is named
    (catalog_runtime(), [catalog_runtime("TrainingRuntime", "1.0.0")],
     [PIN + "use runtimeRef kind TrainingRuntime, name rt: release 1.0.0's copy in this namespace"]),
    # it has none
    (catalog_runtime(), [], [PIN + "release 1.0.0 has no runtime rt; pick one of its runtimes (TrainingRuntimes in "
                                   "namespace ns) or ask the platform team to move the tenant's catalogVersion to 1.2.0"]),
    (catalog_runtime(version="1.0.0"), [], []),  # the pinned release's own cluster runtime
    (volcano_runtime(), [], []),  # not from the catalog: not restricted
])
def test_a_cluster_runtime_from_another_catalog_release_is_refused(rt, extra, expected):
    classes = [priority_class("team-a-default")]
    result = validate_trainjob(trainjob(), rt, cluster_objects=[pinned_namespace(), *classes, *extra])
    assert [str(e) for e in result.errors] == expected


def test_no_pin_no_restriction_and_the_webhook_looks_up_the_pinned_copy():
    from trainyard.controller.tenant_namespace import admission_lookups
    assert validate_trainjob(trainjob(), catalog_runtime(), cluster_objects=[team_a_ns(), priority_class("team-a-default")]).allowed
    assert ("TrainingRuntime", "rt", "ns") in admission_lookups(trainjob())
    assert ("TrainingRuntime", "rt", "ns") not in admission_lookups(trainjob(kind="TrainingRuntime"))


# ---- admission refuses a gang beyond its namespace's ResourceQuota, in fit's words ----------------

def gpu_runtime(gpus="8", as_limit=True):
    resources = {"limits": {"nvidia.com/gpu": gpus}} if as_limit else {"requests": {"nvidia.com/gpu": gpus}}
    return runtime(jobs=[job("node", "trainer", [{"name": "node", "image": "img", "resources": resources}])],
                   ml={"torch": {}}, pod_group={"volcano": {}})


def gpu_quota(hard="16"):
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tenant-quota", "namespace": "ns"},
            "spec": {"hard": {"requests.nvidia.com/gpu": hard}}}


@pytest.mark.parametrize("nodes,as_limit,quotas,operation,expected", [
    # the case: 8 nodes x 8 GPUs (given as limits only, so also requested) against a 16-GPU quota
    (8, True, [gpu_quota()], "CREATE", ["spec.trainer.numNodes: Forbidden: quota tenant-quota in ns allows "
                                        "requests.nvidia.com/gpu 16, this job needs 64: it can never start; reduce "
                                        "numNodes or the resources per node, or ask for a larger quota"]),
    (2, False, [gpu_quota()], "CREATE", []),
    (8, True, [], "CREATE", []),
    (8, True, [gpu_quota()], "UPDATE", []),  # an admitted TrainJob is never refused later for its size
])
def test_admission_refuses_a_gang_its_quota_can_never_hold(nodes, as_limit, quotas, operation, expected):
    rt = gpu_runtime(as_limit=as_limit)

    def lookup(kind, name, ns=None):
        if name is None:
            return quotas if kind == "ResourceQuota" else None
        return {"ClusterTrainingRuntime": rt, "Namespace": team_a_ns(), "PriorityClass": priority_class(name)}.get(kind)

    tj = trainjob(trainer={"numNodes": nodes})
    request = {"uid": "u", "operation": operation, "kind": {"kind": "TrainJob"}, "object": tj}
    if operation == "UPDATE":
        request["oldObject"] = tj
    response = admission_review_response({"request": request}, lookup)["response"]
    assert response["allowed"] is (not expected)
    if expected:
        assert response["status"]["message"].endswith(expected[0])


# ---- staged runtimes: initializers finish before the gang starts ----------------------------------

GROUP = "scheduling.k8s.io/group-name"


def staged_runtime(initializer_status="Complete"):
    """Dataset and model initializers (1 CPU each) the trainer waits for, the trainer 1 GPU per node: the shape
    of the catalog's torchtune runtimes, as a Volcano gang."""
    def initializer(name):
        return job(name, name, [{"name": name, "image": "init", "resources": {"requests": {"cpu": "1"}}}])
    trainer = job("node", "trainer", [{"name": "node", "image": "img", "resources": {"limits": {"nvidia.com/gpu": "1"}}}])
    trainer["dependsOn"] = [{"name": "dataset-initializer", "status": initializer_status},
                            {"name": "model-initializer", "status": initializer_status}]
    return runtime(jobs=[initializer("dataset-initializer"), initializer("model-initializer"), trainer],
                   ml={"torch": {}}, pod_group={"volcano": {}})


def staged_build(*existing, status="Complete"):
    objects = build_objects(trainjob(trainer={"numNodes": 2}), staged_runtime(status), list(existing),
                            key_generator=fixed_key)
    (pg,) = by_kind(objects, "PodGroup")
    annotations = {j["name"]: j["template"]["spec"]["template"].get("metadata", {}).get("annotations", {})
                   for j in the_jobset(objects)["spec"]["replicatedJobs"]}
    job_annotations = {j["name"]: j["template"].get("metadata", {}).get("annotations", {})
                       for j in the_jobset(objects)["spec"]["replicatedJobs"]}
    return pg["spec"], annotations, job_annotations


def test_in_a_tenant_namespace_the_gang_leaves_out_the_jobs_that_finish_before_it():
    """Upstream counts the initializers in minMember: JobSet creates the trainer only once they completed and
    Volcano starts no member before minMember pods exist, so the TrainJob would wait forever."""
    spec, pods, jobs = staged_build(team_a_ns())
    assert spec["minMember"] == 2 and spec["minResources"] == {"nvidia.com/gpu": "2"}
    assert pods["node"][GROUP] == "tj" and jobs["node"][GROUP] == "tj"
    for name in ("dataset-initializer", "model-initializer"):
        assert GROUP not in pods[name] and GROUP not in jobs[name], "a one-pod group of Volcano's own"
        assert pods[name][QUEUE] == "team-a", "in the tenant's queue"


@pytest.mark.parametrize("existing,status", [((), "Complete"), ((team_a_ns(),), "Ready")])
def test_upstream_gang_outside_tenant_namespaces_and_for_ready_dependencies(existing, status):
    """Outside a tenant namespace the gang is upstream's (every pod); a job waited for until Ready runs beside
    the waiting one, so it stays a member."""
    spec, pods, _ = staged_build(*existing, status=status)
    assert spec["minMember"] == 4 and spec["minResources"] == {"cpu": "2", "nvidia.com/gpu": "2"}
    assert all(annotations[GROUP] == "tj" for annotations in pods.values())


# ---- admission: the JobSet waits suspended until Volcano admits the gang ------------------------

def _pod_group(phase):
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "tj", "namespace": "ns"}, "spec": {"minMember": 1}}
    if phase is not None:
        group["status"] = {"phase": phase}
    return group


def _suspended_jobset(objects):
    jobsets = by_kind(objects, "JobSet")
    return jobsets[0]["spec"]["suspend"] if jobsets else "left as it is"


@pytest.mark.parametrize("namespace,pod_group,tj_suspend,expected", [
    # a tenant gang: suspended until Volcano's enqueue action moves its PodGroup past Pending
    (team_a_ns(), None, False, True),
    (team_a_ns(), _pod_group(None), False, True),
    (team_a_ns(), _pod_group("Pending"), False, True),
    (team_a_ns(), _pod_group("Inqueue"), False, False),
    (team_a_ns(), _pod_group("Running"), False, False),
    (team_a_ns(), _pod_group("Unknown"), False, False),
    # the TrainJob's own suspend still wins
    (team_a_ns(), _pod_group("Inqueue"), True, True),
    # outside tenant namespaces: upstream (the JobSet runs at once)
    (team_a_ns(queue=None), _pod_group(None), False, False),
    (None, None, False, False),
])
def test_a_tenant_gangs_jobset_is_suspended_until_volcano_admits_the_gang(namespace, pod_group, tj_suspend, expected):
    existing = [o for o in (namespace, pod_group) if o is not None]
    objects = build_objects(trainjob(trainer={"numNodes": 2}, suspend=tj_suspend), volcano_runtime(), existing, key_generator=fixed_key)
    assert _suspended_jobset(objects) == expected


def test_an_admitted_gangs_running_jobset_is_never_suspended_again():
    """Once resumed, the JobSet is left alone (a PodGroup seen Pending again, e.g. recreated, changes nothing)."""
    running = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
               "metadata": {"name": "tj", "namespace": "ns"}, "spec": {"suspend": False}}
    objects = build_objects(trainjob(trainer={"numNodes": 2}), volcano_runtime(),
                            [team_a_ns(), _pod_group("Pending"), running], key_generator=fixed_key)
    assert _suspended_jobset(objects) == "left as it is"
