"""Pods the API server refuses (pure parts): which refusals are for good, the pods admission dry-runs, the Job
controller's FailedCreate Events matched to a JobSet and confirmed by the Job's own status, and the admission
answer (ServiceAccounts a tenant may name; the dry-run's refusal in the API server's words)."""

from __future__ import annotations

import pytest

from trainyard import k8s as K
from trainyard.controller import pod_refusals as P
from trainyard.controller.admission import admission_review_response
from trainyard.controller.tenant_namespace import pod_policy_errors

from builders import tenant_namespace
from ctl_builders import job, runtime, trainjob

PSA = ('pods "tj-node-0-0-abcde" is forbidden: violates PodSecurity "baseline:latest": privileged (container "node" '
       'must not set securityContext.privileged=true)')
LIMIT = 'pods "tj-node-0-0-x" is forbidden: maximum cpu usage per Container is 2, but limit is 4'
SA = 'pods "tj-node-0-0-x" is forbidden: error looking up service account team-a/ci: serviceaccount "ci" not found'
VAP = ("pods \"tj-node-0-0-x\" is forbidden: ValidatingAdmissionPolicy 'no-host-path' with binding 'b' denied "
       "request: hostPath volumes are not allowed")
NEVER_QUOTA = ('pods "tj-node-0-0-x" is forbidden: exceeded quota: other-priority-classes, requested: pods=1, '
               'used: pods=0, limited: pods=0')
FULL_QUOTA = ('pods "tj-node-0-0-x" is forbidden: exceeded quota: tenant-quota, requested: requests.nvidia.com/gpu=8, '
              'used: requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16')
WEBHOOK_DOWN = ('Internal error occurred: failed calling webhook "mpod.kb.io": Post "https://127.0.0.1:1/mutate": '
                'connection refused')
INVALID = 'Pod "tj-node-0-0-x" is invalid: spec.containers[0].resources.requests: Invalid value: "4": must be less ' \
          'than or equal to cpu limit of 2'


@pytest.mark.parametrize("message, permanent", [
    (PSA, True), (LIMIT, True), (SA, True), (VAP, True), (NEVER_QUOTA, True), (INVALID, True),
    ("Error creating: " + PSA, True),
    (FULL_QUOTA, False),  # other pods hold the quota now: it frees
    ('pods "x" is forbidden: error looking up service account ns/default: serviceaccount "default" not found',
     False),  # a new namespace's default account comes moments later
    (WEBHOOK_DOWN, False), ("", False),
    ('unable to create new content in namespace team-a because it is being terminated', False),
    ("something the controller has never seen", False),
])
def test_only_refusals_that_repeating_cannot_cure_count(message, permanent):
    assert (P.permanent_fix(message) is not None) is permanent


def test_a_refusal_keeps_the_api_servers_words_and_names_the_fix():
    refusal = P.classify("Job tj-node-0", "Error creating: " + PSA)
    assert refusal.message == PSA
    assert "Pod Security" in refusal.fix
    assert refusal.text().startswith(f"the API server refuses the pods of Job tj-node-0: {PSA}; fix: ")


def _jobset(name="tj", uid="js-uid", created="2026-01-01T00:00:00Z", replicas=1):
    return {"apiVersion": K.JOBSET_API_VERSION, "kind": "JobSet",
            "metadata": {"name": name, "namespace": "team-a", "uid": uid, "creationTimestamp": created},
            "spec": {"replicatedJobs": [{"name": "node", "replicas": replicas, "template": {"spec": {"template": {
                "metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}},
                "spec": {"containers": [{"name": "node", "image": "img"}], "serviceAccountName": "sa"}}}}}]}}


def test_the_pods_to_try_are_the_templates_as_the_job_controller_makes_them():
    [(name, pod)] = P.pods_to_try(_jobset())
    assert name == "node"
    meta = pod["metadata"]
    assert (meta["generateName"], meta["namespace"], meta["annotations"]) == ("tj-node-0-0-", "team-a", {"a": "b"})
    assert meta["labels"]["app"] == "x" and meta["labels"]["jobset.sigs.k8s.io/jobset-name"] == "tj"
    assert meta["labels"]["batch.kubernetes.io/job-name"] == "tj-node-0"
    [owner] = meta["ownerReferences"]  # a Job's pod, not a bare one (the queue guard refuses bare gang pods)
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", "tj-node-0", True)
    assert owner["uid"] == meta["labels"]["batch.kubernetes.io/controller-uid"]
    assert pod["spec"]["serviceAccountName"] == "sa" and pod["kind"] == "Pod"


def _event(job="tj-node-0", when="2026-01-01T00:01:00Z", component="job-controller", uid="job-uid", message=PSA):
    return {"reason": "FailedCreate", "message": "Error creating: " + message, "lastTimestamp": when,
            "source": {"component": component}, "metadata": {"namespace": "team-a"},
            "involvedObject": {"kind": "Job", "name": job, "namespace": "team-a", "uid": uid}}


@pytest.mark.parametrize("event, found", [
    (_event(), True),
    (_event(job="tj-node-1"), False),  # no such Job (replicas 1)
    (_event(job="tjx-node-0"), False),  # another JobSet's Job
    (_event(when="2025-12-31T23:59:00Z"), False),  # about an earlier JobSet of the same name
    (_event(component="alice"), False),  # not the Job controller's
])
def test_failed_create_events_are_matched_to_this_jobsets_jobs(event, found):
    assert bool(P.candidate_events(_jobset(), [event])) is found


def _job(uid="job-uid", owner="js-uid", **status):
    return {"metadata": {"name": "tj-node-0", "uid": uid,
                         "ownerReferences": [{"kind": "JobSet", "uid": owner, "controller": True}]},
            "status": status}


@pytest.mark.parametrize("job, believed", [
    (_job(), True),
    (_job(active=1), False),  # a pod exists: not refused (or no longer)
    (_job(succeeded=1), False),
    (_job(uid="other"), False),  # the Event is about another Job of that name
    (_job(owner="someone-else"), False),
    (None, False),
])
def test_an_event_is_believed_only_when_the_job_itself_shows_no_pod(job, believed):
    assert P.confirmed(_event(), job, _jobset()) is believed


@pytest.mark.parametrize("job_name, names, owner", [
    ("tj-node-0", ["tj", "tj-node", "other"], "tj"),  # "tj-node" would leave "-0" (no replicated job)
    ("a-b-node-12", ["a", "a-b"], "a-b"),
    ("tj-node-0", ["other"], None),
])
def test_the_owning_jobset_is_found_from_the_job_name(job_name, names, owner):
    assert P.owning_jobset_name(job_name, names) == owner


# ---- admission ------------------------------------------------------------------------------------------

ACCOUNTS = K.NAMESPACE_SERVICE_ACCOUNTS_ANNOTATION


def _team_a(accounts=None):
    return tenant_namespace("team-a", queue="team-a", annotations={ACCOUNTS: accounts} if accounts else {})


@pytest.mark.parametrize("namespace, account, refused", [
    (_team_a(), None, False),
    (_team_a(), "default", False),
    (_team_a(), "ci-deployer", True),
    (_team_a("trainer, reader"), "trainer", False),
    (_team_a("trainer"), "ci-deployer", True),
    (tenant_namespace("plain"), "ci-deployer", False),  # not a tenant namespace: upstream behaviour
])
def test_a_tenant_pod_runs_only_as_default_or_a_listed_service_account(namespace, account, refused):
    jobset = _jobset()
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod.pop("serviceAccountName")
    if account:
        pod["serviceAccountName"] = account
    errors = pod_policy_errors(jobset, namespace, "spec.runtimePatches")
    assert bool(errors) is refused
    if refused:
        assert errors[0].field == "spec.runtimePatches" and repr(account) in errors[0].message
        assert "serviceAccounts" in errors[0].message


def _review(tj):
    return {"request": {"uid": "u", "operation": "CREATE", "kind": {"kind": "TrainJob"}, "object": tj}}


def _runtime():
    return runtime(jobs=[job("node", "trainer")], ml={"torch": {}}, pod_group={"volcano": {}})


def _lookup(namespace):
    queue = {"apiVersion": K.VOLCANO_API_VERSION, "kind": "Queue", "metadata": {"name": "team-a"}}
    return lambda kind, name, ns=None: {"ClusterTrainingRuntime": _runtime(), "Namespace": namespace,
                                        "Queue": queue}.get(kind)


def _patched(account):
    tj = trainjob(namespace="team-a", trainer={"numNodes": 1})
    tj["spec"]["runtimePatches"] = [{"manager": "example.com/alice", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
            "serviceAccountName": account}}}}}]}}}}]
    return tj


def test_admission_refuses_a_service_account_set_through_runtime_patches():
    response = admission_review_response(_review(_patched("ci-deployer")), _lookup(_team_a()))["response"]
    assert response["allowed"] is False, response
    assert "ServiceAccount 'ci-deployer'" in response["status"]["message"]
    assert admission_review_response(_review(_patched("trainer")), _lookup(_team_a("trainer")))["response"]["allowed"]


def test_admission_refuses_pods_the_api_server_would_refuse_in_its_words_and_ignores_a_full_quota():
    tried = []

    def dry_run(obj):
        tried.append(obj)
        return PSA if obj["kind"] == "Pod" else None

    response = admission_review_response(_review(trainjob(namespace="team-a", trainer={"numNodes": 1})),
                                         _lookup(_team_a()), dry_run)["response"]
    assert [(o["kind"], o["metadata"]["namespace"]) for o in tried] == [("JobSet", "team-a"), ("Pod", "team-a")]
    assert response["allowed"] is False and PSA in response["status"]["message"]
    assert "fix: remove what the namespace's Pod Security level forbids" in response["status"]["message"]
    full = admission_review_response(_review(trainjob(namespace="team-a", trainer={"numNodes": 1})),
                                     _lookup(_team_a()), lambda pod: FULL_QUOTA)["response"]
    assert full["allowed"] is True


BAD_LABEL = ('JobSet.jobset.x-k8s.io "tj" is invalid: metadata.labels: Invalid value: "bad key!": name part must '
             "consist of alphanumeric characters")


@pytest.mark.parametrize("message, field", [
    (BAD_LABEL, "spec.labels"),
    ('jobsets.jobset.x-k8s.io "tj" already exists', None),
    # a JobSet count quota of 0 may be raised: the controller reports it at apply (ApplyFailed), admission does not
    ('jobsets.jobset.x-k8s.io "tj" is forbidden: exceeded quota: no-jobsets, requested: count/jobsets.jobset.x-k8s.io=1, '
     "used: count/jobsets.jobset.x-k8s.io=0, limited: count/jobsets.jobset.x-k8s.io=0", None),
    ("Internal error occurred: failed calling webhook \"mjobset.kb.io\"", None),
])
def test_admission_refuses_a_jobset_the_api_server_refuses_naming_the_trainjob_field(message, field):
    review = _review(trainjob(namespace="team-a", trainer={"numNodes": 1}, labels={"bad key!": "x"}))
    response = admission_review_response(review, _lookup(_team_a()),
                                         lambda obj: message if obj["kind"] == "JobSet" else None)["response"]
    if field is None:
        assert response["allowed"] is True
    else:
        assert response["allowed"] is False and field in response["status"]["message"]
        assert "the API server refuses the JobSet this TrainJob builds" in response["status"]["message"]


def _pod(jobset):
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("field, value, refused", [
    ("tolerations", [{"key": K.RESERVATION_TAINT, "operator": "Exists", "effect": "NoSchedule"}], True),
    ("tolerations", [{"operator": "Exists"}], True),  # tolerates every taint, the platform's too
    ("tolerations", [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], False),
    ("terminationGracePeriodSeconds", 86400, True),
    ("terminationGracePeriodSeconds", 300, False),  # the default limit
    ("terminationGracePeriodSeconds", 30, False),
])
def test_tenant_pods_may_not_tolerate_the_platforms_taint_nor_outlast_a_suspension(field, value, refused):
    jobset = _jobset()
    _pod(jobset).pop("serviceAccountName")
    _pod(jobset)[field] = value
    errors = pod_policy_errors(jobset, _team_a(), "spec.podTemplateOverrides")
    assert bool(errors) is refused, [str(e) for e in errors]


def test_the_grace_limit_is_the_tenants():
    jobset = _jobset()
    _pod(jobset).pop("serviceAccountName")
    _pod(jobset)["terminationGracePeriodSeconds"] = 600
    namespace = _team_a()
    namespace["metadata"]["annotations"][K.NAMESPACE_MAX_GRACE_ANNOTATION] = "900"
    assert pod_policy_errors(jobset, namespace, "spec") == []
    namespace["metadata"]["annotations"][K.NAMESPACE_MAX_GRACE_ANNOTATION] = "60"
    [error] = pod_policy_errors(jobset, namespace, "spec")
    assert "terminationGracePeriodSeconds 600 is above namespace team-a's limit of 60" in error.message


@pytest.mark.parametrize("message, since, now, timeout, due", [
    (FULL_QUOTA, "2026-01-01T00:00:00Z", "2026-01-01T00:00:04Z", 10, 6.0),
    (FULL_QUOTA, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", 10, 0.0),
    (FULL_QUOTA, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", 0, None),  # no timeout set: never released
    (FULL_QUOTA, "", "2026-01-01T00:01:00Z", 10, None),
])
def test_a_gang_refused_for_a_passing_reason_is_released_after_the_timeout(message, since, now, timeout, due):
    event = {**_event(message=message, when=since), "firstTimestamp": since}
    refusal = P.refusal_of(event)
    assert not refusal.permanent and refusal.since == since
    assert P.release_due(refusal, now, timeout) == due


def test_a_permanent_refusal_from_an_event_names_its_fix_and_a_release_is_reported_once():
    refusal = P.refusal_of({**_event(), "firstTimestamp": "2026-01-01T00:00:00Z"})
    assert refusal.permanent and refusal.message == PSA
    tj = {"metadata": {"name": "tj", "uid": "u1"}}
    assert P.released_event_name(tj, refusal) == P.released_event_name(tj, refusal)
    later = P.refusal_of({**_event(), "firstTimestamp": "2026-01-01T00:10:00Z"})
    assert P.released_event_name(tj, later) != P.released_event_name(tj, refusal)
    assert "no longer holds its queue" in P.released_message(refusal, 10)


def test_a_gang_admitted_again_is_counted_from_its_new_podgroup():
    refusal = P.refusal_of({**_event(message=FULL_QUOTA), "firstTimestamp": "2026-01-01T00:00:00Z"})
    assert P.counted_from(refusal, "2026-01-01T00:05:00Z").since == "2026-01-01T00:05:00Z"
    assert P.counted_from(refusal, "2025-12-31T00:00:00Z").since == "2026-01-01T00:00:00Z"
    assert P.counted_from(refusal, "garbage").since == "2026-01-01T00:00:00Z"


def _review_as(user, tj, old=None):
    request = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "kind": {"kind": "TrainJob"}, "object": tj,
               "userInfo": {"username": user}}
    if old:
        request["oldObject"] = old
    return {"request": request}


def test_only_the_controller_writes_the_reclaim_loops_note():
    """Red-team finding: a forged trainyard.dev/reclaimed-for note stopped reclaim cluster-wide."""
    plain = trainjob(namespace="team-a", trainer={"numNodes": 1})
    noted = trainjob(namespace="team-a", trainer={"numNodes": 1})
    noted["metadata"]["annotations"] = {K.RECLAIMED_FOR_ANNOTATION: "team-b/gang 1700000000"}
    controller = frozenset({"system:serviceaccount:trainyard-system:trainyard-controller"})
    lookup = _lookup(tenant_namespace("team-a"))
    forged = admission_review_response(_review_as("alice", noted), lookup, platform_users=controller)["response"]
    assert forged["allowed"] is False and K.RECLAIMED_FOR_ANNOTATION in forged["status"]["message"]
    added = admission_review_response(_review_as("alice", noted, old=plain), lookup, platform_users=controller)
    assert added["response"]["allowed"] is False
    by_controller = admission_review_response(_review_as(next(iter(controller)), noted, old=plain), lookup,
                                              platform_users=controller)
    assert by_controller["response"]["allowed"] is True
    untouched = admission_review_response(_review_as("alice", noted, old=noted), lookup, platform_users=controller)
    assert untouched["response"]["allowed"] is True  # alice may still edit a TrainJob the loop noted


def test_a_dry_run_pod_gets_the_claim_volumes_the_jobset_controller_adds():
    """The torchtune runtimes mount "initializer", a volumeClaimPolicies template: the JobSet controller adds the
    volume to each Job; a pod without it is invalid, and the webhook refused every torchtune TrainJob."""
    jobset = _jobset()
    _pod(jobset)["containers"][0]["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]
    jobset["spec"]["volumeClaimPolicies"] = [{"templates": [{"metadata": {"name": "initializer"}},
                                                            {"metadata": {"name": "unmounted"}}]}]
    [(_, pod)] = P.pods_to_try(jobset)
    assert pod["spec"]["volumes"] == [{"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer-tj"}}]


def test_a_runtime_with_huge_replicas_is_refused_before_anything_is_built_per_pod():
    """bad_input found it: a replicated job with 2**63 replicas made the build list a hostname per pod until the
    machine ran out of memory (the controller too, for a runtime admitted while the webhook was away)."""
    from trainyard.controller.build import build_objects
    from trainyard.controller.errors import ControllerError

    rt = runtime(jobs=[job("node", "trainer")], ml={"torch": {}})
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2**63
    with pytest.raises(ControllerError, match=r"replicas: .*from 0 to 5000"):
        build_objects(trainjob(trainer={"numNodes": 1}), rt, [])
