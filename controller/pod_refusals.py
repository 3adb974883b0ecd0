"""Pods the API server refuses: foreseen at admission, noticed at run time, never left holding a queue.

A TrainJob's pods are created late, by the Job controller, after Volcano admitted the whole gang and reserved
its share of the queue. Every admission layer between the TrainJob and a running pod can still refuse them
there: Pod Security admission, LimitRange min/max, a ResourceQuota that could never hold the pod, the
ServiceAccount admission plugin (unknown account), ValidatingAdmissionPolicies and webhooks. The Job
controller then retries forever and records the refusal only as a `FailedCreate` Event on a Job nobody
looks at, while the PodGroup keeps the gang's GPUs reserved.

trainyard handles that class in two places, with the same words (the API server's own):
- admission (`admission.pod_errors`): the webhook dry-runs one pod per replicated job of the JobSet the
  controller would build (`dryRun=All`, through every admission layer of the API server) and refuses the
  TrainJob with the API server's message and the fix; `trainyard fit` gets the same answer through its
  dry-run create of the TrainJob.
- run time (`find_refusal`, from the reconciler): a policy added later or a race is noticed from the Job
  controller's `FailedCreate` Event, checked against what only the Job controller writes (the Job's status
  shows no pod and the Job belongs to this JobSet), and the TrainJob is failed (condition Failed, reason
  `PodsRefused`, the API server's message and the fix; one Warning Event). Failing it releases everything
  it held: its JobSet is deleted (no more retries) and its Volcano PodGroup with it.

Only refusals that repeating cannot cure count: a ResourceQuota that is merely full now (other pods hold
it), a webhook that did not answer or an API server that is busy are transient, and are left to the
controller's gang start timeout.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Iterable

from trainyard import k8s as K
from trainyard.k8s import parse_quantity
from trainyard.timestamps import parse_time

from . import constants as C
from . import k8s

REASON_PODS_REFUSED = C.REASON_PODS_REFUSED
EVENT_PODS_REFUSED = "TrainJobPodsRefused"
JOB_CONTROLLER = "job-controller"
FAILED_CREATE = "FailedCreate"
# The Events informer's selector: only what the Job controller says when the API server refuses a pod.
FAILED_CREATE_SELECTOR = f"involvedObject.kind=Job,reason={FAILED_CREATE}"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"

# (pattern in the API server's message, the fix): the refusals repeating cannot cure.
_PERMANENT = (
    (re.compile(r"violates PodSecurity"),
     "remove what the namespace's Pod Security level forbids from the pod template (the TrainJob's "
     "runtimePatches or podTemplateOverrides, or the runtime), or ask the platform team for another level"),
    (re.compile(r"(maximum|minimum) \S+ usage per (Container|Pod)|(max|min) limit to request ratio"),
     "keep every container's requests and limits within the namespace's LimitRange "
     "(kubectl describe limitrange -n NAMESPACE)"),
    (re.compile(r"must be (less than or )?equal to \S+ limit"),
     "keep each container's requests at or below its limits and a GPU's request equal to its limit: set "
     "spec.trainer.resourcesPerNode.requests with its limits (the runtime's requests are kept where the TrainJob "
     "gives none)"),
    (re.compile(r"error looking up service account|serviceaccount \"[^\"]*\" not found"),
     "name a ServiceAccount that exists in the namespace and that the platform allows for training"),
    (re.compile(r"ValidatingAdmissionPolicy .* denied request|admission webhook .* denied the request"),
     "change what the policy names, or ask the platform team which policy applies"),
    (re.compile(r"\bis invalid\b|\bInvalid value\b|\bRequired value\b|\bUnsupported value\b"),
     "fix the field the API server names in the pod template (runtimePatches or the runtime)"),
)
_QUOTA = re.compile(r"exceeded quota: ([^,]+), requested: ([^,]+(?:,[^,=]+=[^,]+)*), used: .*?, limited: (.*)$")
QUOTA_FIX = "use a priority class and resources the namespace's ResourceQuotas allow, or ask for a larger quota"
# Transient words that may sit inside a message the patterns above would otherwise match.
_TRANSIENT = re.compile(r"failed calling webhook|context deadline exceeded|connection refused|"
                        r"because it is being terminated|please try again|the server is currently unable|"
                        # a new namespace's `default` ServiceAccount is made moments after the namespace
                        r"serviceaccount \"default\" not found")


@dataclass(frozen=True)
class Refusal:
    job: str  # the replicated job (admission) or the Job (run time) whose pod was refused
    message: str  # the API server's words
    fix: str  # empty for a refusal that may pass later (a full quota, a webhook that did not answer)
    since: str = ""  # run time: when the Job controller first reported it (the Event's firstTimestamp)

    @property
    def permanent(self) -> bool:
        return bool(self.fix)

    def text(self) -> str:
        return f"the API server refuses the pods of {self.job}: {self.message}" + (f"; fix: {self.fix}" if self.fix else "")


def _quota_never_fits(message: str) -> bool:
    """A quota refusal that no amount of waiting cures: for some resource the pod alone asks more than the limit
    ("requested: pods=1, used: pods=0, limited: pods=0")."""
    found = _QUOTA.search(message)
    if not found:
        return False
    requested = dict(part.split("=", 1) for part in found.group(2).split(",") if "=" in part)
    limited = dict(part.split("=", 1) for part in found.group(3).split(",") if "=" in part)
    for resource, amount in requested.items():
        if resource.strip() in {r.strip() for r in limited}:
            limit = limited[next(r for r in limited if r.strip() == resource.strip())]
            try:
                if parse_quantity(amount.strip(), resource) > parse_quantity(limit.strip(), resource):
                    return True
            except (ValueError, TypeError):
                continue
    return False


def permanent_fix(message: str) -> str | None:
    """The fix for a refusal that repeating cannot cure; None for a transient one (or a message not understood)."""
    if not message or _TRANSIENT.search(message):
        return None
    if "exceeded quota" in message:
        return QUOTA_FIX if _quota_never_fits(message) else None
    for pattern, fix in _PERMANENT:
        if pattern.search(message):
            return fix
    return None


def classify(job: str, message: str) -> Refusal | None:
    fix = permanent_fix(message)
    return Refusal(job=job, message=message.removeprefix("Error creating: "), fix=fix) if fix else None


# ---- admission: the pods to dry-run ---------------------------------------------------------------------

def pods_to_try(jobset: dict) -> list[tuple[str, dict]]:
    """(replicated job name, a Pod as the Job controller would create it) for each replicated job of the JobSet:
    the pod template's labels and annotations plus those the JobSet and Job controllers add, its spec, and a
    controller owner reference to its Job (admission policies tell a Job's pod from a bare one by it; a dry run
    stores nothing, so the Job need not exist)."""
    out = []
    namespace, name = k8s.namespace_of(jobset), k8s.name_of(jobset)
    for job in K.mapping(jobset.get("spec")).get("replicatedJobs") or []:
        if not isinstance(job, dict):
            continue
        template = K.mapping(K.mapping(K.mapping(job.get("template")).get("spec")).get("template"))
        meta = K.mapping(template.get("metadata"))
        job_name = f"{name}-{job.get('name', '')}-0"
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{job_name}"))
        labels = {**K.mapping(meta.get("labels")),
                  JOBSET_NAME_LABEL: name, REPLICATED_JOB_LABEL: str(job.get("name", "")),
                  "batch.kubernetes.io/job-name": job_name, "job-name": job_name,
                  "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid}
        pod_meta = {"generateName": f"{job_name}-0-"[:58], "namespace": namespace, "labels": labels,
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": uid,
                                         "controller": True}]}
        if isinstance(meta.get("annotations"), dict) and meta["annotations"]:
            pod_meta["annotations"] = dict(meta["annotations"])
        spec = K.json_copy(K.mapping(template.get("spec")))
        add_claim_volumes(spec, jobset)
        out.append((str(job.get("name", "")), {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}))
    return out


def add_claim_volumes(pod_spec: dict, jobset: dict) -> None:
    """What the JobSet controller adds to each Job it makes (JobSet v0.12 `addVolumes`): for every template of
    `volumeClaimPolicies` a container mounts, a volume of that name on the claim "<template>-<jobset>" (the claim
    need not exist for a dry run)."""
    mounted = {K.mapping(m).get("name") for c in (pod_spec.get("containers") or []) + (pod_spec.get("initContainers")
               or []) if isinstance(c, dict) for m in c.get("volumeMounts") or []}
    found = pod_spec.get("volumes")
    volumes: list = found if isinstance(found, list) else []
    have = {K.mapping(v).get("name") for v in volumes}
    for policy in K.mapping(jobset.get("spec")).get("volumeClaimPolicies") or []:
        for template in K.mapping(policy).get("templates") or []:
            name = K.mapping(K.mapping(template).get("metadata")).get("name")
            if name and name in mounted and name not in have:
                volumes.append({"name": name, "persistentVolumeClaim": {
                    "claimName": f"{name}-{k8s.name_of(jobset)}"}})
                have.add(name)
    if volumes:
        pod_spec["volumes"] = volumes


# ---- run time: the Job controller's FailedCreate Events ------------------------------------------------

def _job_names(jobset: dict) -> dict[str, str]:
    """Job name -> replicated job, for the Jobs the JobSet controller makes ("<jobset>-<replicated job>-<index>")."""
    name = k8s.name_of(jobset)
    out = {}
    for job in K.mapping(jobset.get("spec")).get("replicatedJobs") or []:
        if isinstance(job, dict):
            for index in range(int(job.get("replicas") or 1)):
                out[f"{name}-{job.get('name', '')}-{index}"] = str(job.get("name", ""))
    return out


def _event_time(event: dict) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")


def candidate_events(jobset: dict, events: Iterable[dict]) -> list[dict]:
    """The Job controller's FailedCreate Events about this JobSet's Jobs, not older than the JobSet, newest first.
    An Event only names a suspect: `confirmed` checks the Job itself, which tenants cannot write."""
    names = _job_names(jobset)
    created = K.mapping(jobset.get("metadata")).get("creationTimestamp") or ""
    found = []
    for event in events:
        involved = K.mapping(event.get("involvedObject"))
        source = K.mapping(event.get("source")).get("component") or event.get("reportingComponent")
        if event.get("reason") != FAILED_CREATE or involved.get("kind") != "Job" or source != JOB_CONTROLLER \
                or involved.get("namespace", k8s.namespace_of(event)) != k8s.namespace_of(jobset) \
                or involved.get("name") not in names:
            continue
        try:
            if created and parse_time(_event_time(event)) < parse_time(created):
                continue
        except ValueError:
            continue
        found.append(event)
    return sorted(found, key=_event_time, reverse=True)


def confirmed(event: dict, job: dict | None, jobset: dict) -> bool:
    """Whether the Job the Event names is this JobSet's (controller owner uid) and has no pod at all: what the Job
    controller writes in its status, which a tenant cannot forge."""
    if job is None:
        return False
    meta = K.mapping(job.get("metadata"))
    involved = K.mapping(event.get("involvedObject"))
    if involved.get("uid") and meta.get("uid") != involved.get("uid"):
        return False
    owner = next((ref for ref in meta.get("ownerReferences") or [] if isinstance(ref, dict) and ref.get("controller")),
                 None)
    if owner is None or owner.get("uid") != K.mapping(jobset.get("metadata")).get("uid"):
        return False
    status = K.mapping(job.get("status"))
    return not any(int(status.get(key) or 0) for key in ("active", "ready", "succeeded", "failed", "terminating"))


def has_pods(jobset: dict) -> bool:
    """Whether the JobSet controller counts a pod in any of its Jobs (then nothing was refused for good): the
    reconcile of a running gang asks nothing more."""
    return any(int(K.mapping(status).get(key) or 0) for status in
               K.mapping(jobset.get("status")).get("replicatedJobsStatus") or []
               for key in ("active", "ready", "succeeded", "failed"))


def refusal_of(event: dict) -> Refusal:
    """The Event's refusal, permanent or not, dated from the first time the Job controller reported it."""
    message = str(event.get("message") or "")
    return Refusal(job=f"Job {K.mapping(event.get('involvedObject')).get('name', '')}",
                   message=message.removeprefix("Error creating: "), fix=permanent_fix(message) or "",
                   since=str(event.get("firstTimestamp") or _event_time(event)))


def release_due(refusal: Refusal, now: str, timeout_s: float) -> float | None:
    """Seconds until a gang whose pods have been refused since `refusal.since` is released (0: now); None when no
    timeout is set or the time cannot be read."""
    if timeout_s <= 0 or not refusal.since:
        return None
    try:
        waited = (parse_time(now) - parse_time(refusal.since)).total_seconds()
    except ValueError:
        return None
    return max(0.0, timeout_s - waited)


def counted_from(refusal: Refusal, start: str) -> Refusal:
    """`refusal` dated no earlier than `start` (an RFC 3339 time; unreadable ones are ignored)."""
    try:
        later = bool(start) and (not refusal.since or parse_time(start) > parse_time(refusal.since))
    except ValueError:
        later = False
    return Refusal(refusal.job, refusal.message, refusal.fix, start) if later else refusal


EVENT_GANG_RELEASED = "TrainJobGangReleased"


def released_message(refusal: Refusal, timeout_s: float) -> str:
    return (f"no pod of the gang could be created for {timeout_s:g} s, so it no longer holds its queue: the PodGroup "
            f"is deleted and the JobSet suspended; it waits to be admitted again ({refusal.text()})")


def released_event_name(trainjob: dict, refusal: Refusal) -> str:
    """One Event per release (the same refusal, first reported at the same time)."""
    import hashlib

    meta = K.mapping(trainjob.get("metadata"))
    text = "\0".join([str(meta.get("uid", "")), refusal.job, refusal.since])
    return f"{meta.get('name', '')}.gangreleased.{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def owning_jobset_name(job_name: str, jobset_names: Iterable[str]) -> str | None:
    """The JobSet (among `jobset_names` of the namespace) whose Jobs are named "<jobset>-<replicated job>-<index>":
    the longest name that prefixes `job_name` and leaves "-<something>-<digits>"."""
    best = None
    for name in jobset_names:
        rest = job_name[len(name):]
        if job_name.startswith(name + "-") and re.fullmatch(r"-.+-\d+", rest) and (best is None or len(name) > len(best)):
            best = name
    return best


def owning_trainjob(pod: dict, trainjob_names: Iterable[str]) -> str | None:
    """The TrainJob (among `trainjob_names` of the pod's namespace) a pod belongs to: its controller owner is a Job
    of the TrainJob's JobSet, which carries the TrainJob's name. Labels a tenant can write are not trusted."""
    owner = next((ref for ref in pod["metadata"].get("ownerReferences") or []
                  if ref.get("controller") and ref.get("kind") == "Job"), None)
    return owning_jobset_name(owner["name"], trainjob_names) if owner else None


__all__ = ["REASON_PODS_REFUSED", "EVENT_PODS_REFUSED", "FAILED_CREATE_SELECTOR", "Refusal", "permanent_fix",
           "classify", "pods_to_try", "candidate_events", "confirmed", "has_pods", "refusal_of",
           "release_due", "counted_from", "released_message", "released_event_name", "EVENT_GANG_RELEASED", "owning_jobset_name",
           "owning_trainjob"]
