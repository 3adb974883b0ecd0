"""The controller's stalled-job loop (the I/O half of `usage.stalls`): every `period` seconds, while this replica
leads, each TrainJob whose pods hold GPUs is judged on its trainerStatus (or its first pod's last log line); a
stalled one gets a Warning Event `TrainJobStalled` (once per stall: the Event's name carries when progress stopped)
and, with the action `suspend`, `spec.suspend: true`, which gives its GPUs back (its JobSet is suspended, its pods
deleted; resuming it starts them again). What it finds is recorded on each namespace (`trainyard.dev/stalled-trainjobs`,
written only when it changes): `report` lists it from there, and a restarted loop or a new leader starts from it."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Callable

from trainyard import k8s as K
from trainyard.capacity.loop import Loop
from trainyard.controller.pod_refusals import owning_trainjob
from trainyard.controller.runtime.apiserver import RESOURCES, ApiServer, Resource
from trainyard.controller.runtime.transport import ApiError
from trainyard.tenant_policy import StalledTrainJob, stalled_from_annotation, stalled_to_annotation
from trainyard.timestamps import format_epoch
from trainyard.usage.stalls import (REASON, Seen, can_be_stalled, changed_namespaces, judge, last_log_time,
                                    remembered, stalled_now, trainer_progress)

log = logging.getLogger(__name__)

PODS = Resource("v1", "Pod", "pods")
# Every Job's pod carries its Job's uid under this label (the Job API enforces it: a template cannot change it);
# the pod's controller owner reference names its Job. Labels a tenant writes (jobset-name, through
# podTemplateOverrides) find nothing: relabelled pods once hid a stalled job from the watch.
JOB_POD_LABEL = "batch.kubernetes.io/controller-uid"


def gpu_pods_by_trainjob(pods: list[dict], trainjobs: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """(namespace, TrainJob) -> its Running pods that request GPUs: a pod's controller owner is a Job named
    "<JobSet>-<replicated job>-<index>", and a TrainJob's JobSet carries its name."""
    names: dict[str, list[str]] = defaultdict(list)
    for trainjob in trainjobs:
        names[trainjob["metadata"]["namespace"]].append(trainjob["metadata"]["name"])
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for pod in pods:
        meta = pod["metadata"]
        name = owning_trainjob(pod, names[meta["namespace"]])
        if name and K.pod_spec_holds_gpus(pod.get("spec") or {}) and (pod.get("status") or {}).get("phase") == "Running":
            out[(meta["namespace"], name)].append(pod)
    return out


class StallWatcher(Loop):
    def __init__(self, api: ApiServer, after_s: float, action: str = "none", period: float = 60.0,
                 after_log_s: float = 0.0, leading: Callable[[], bool] = lambda: True,
                 clock: Callable[[], float] = time.time):
        super().__init__(period)
        self.api, self.after_s, self.action, self.after_log_s = api, after_s, action, after_log_s
        self.leading, self.clock = leading, clock
        self.seen: dict[str, Seen] = {}

    def step(self) -> list[str]:
        """One round; returns the TrainJobs (namespace/name) found stalled."""
        if not self.leading():
            self.seen.clear()
            return []
        # TrainJobs and Namespaces from the controller's stores; pods only when some TrainJob can be judged at all
        recorded = self.recorded()
        kept_suspended = {entry.uid: entry for entries in recorded.values() for entry in entries if entry.suspended}
        memory = {**remembered(recorded), **self.seen}
        every = self.api.list(RESOURCES["TrainJob"]).get("items") or []
        trainjobs = [tj for tj in every if can_be_stalled(tj, self.after_s, self.after_log_s)]
        running = self.api.list(PODS, label_selector=JOB_POD_LABEL, field_selector="status.phase=Running") \
            if trainjobs else {}
        holding = gpu_pods_by_trainjob(running.get("items") or [], trainjobs)
        now_s, stalled, seen = self.clock(), [], {}
        now_iso = format_epoch(now_s)
        found = [(tj["metadata"]["namespace"], entry) for tj in every
                 if (entry := kept_suspended.get(tj["metadata"]["uid"])) and (tj.get("spec") or {}).get("suspend")]
        for trainjob in trainjobs:
            meta = trainjob["metadata"]
            key = (meta["namespace"], meta["name"])
            pods = holding.get(key, [])
            last_log = self.last_log(pods) if pods and self.after_log_s > 0 and not (
                trainjob.get("status") or {}).get("trainerStatus") else None
            remembers, stall = judge(trainjob, bool(pods), memory.get(meta["uid"]), now_s, self.after_s,
                                     last_log, self.after_log_s)
            if remembers is not None:
                seen[meta["uid"]] = remembers
            if stall is None:
                continue
            self.flag(trainjob, stall.why, stall.since_s)
            stalled.append("/".join(key))
            suspended = self.action == "suspend" or bool((trainjob.get("spec") or {}).get("suspend"))
            found.append((key[0], StalledTrainJob(key[1], meta["uid"], stall.why, stall.since_s, now_iso,
                                                  trainer_progress(trainjob)[0], suspended)))
        self.seen = seen
        self.record(recorded, stalled_now(found, recorded))
        return stalled

    def recorded(self) -> dict[str, list[StalledTrainJob]]:
        """Each namespace's stalled TrainJobs as last recorded (by this loop, or the leader before it)."""
        out = {}
        for namespace in self.api.list(RESOURCES["Namespace"]).get("items") or []:
            text = (namespace["metadata"].get("annotations") or {}).get(K.NAMESPACE_STALLED_ANNOTATION)
            if text is not None:
                out[namespace["metadata"]["name"]] = stalled_from_annotation(text)
        return out

    def record(self, recorded: dict[str, list[StalledTrainJob]], now: dict[str, list[StalledTrainJob]]) -> None:
        for namespace, entries in sorted(changed_namespaces(recorded, now).items()):
            value = stalled_to_annotation(entries) if entries else None
            try:
                self.api.merge_patch(RESOURCES["Namespace"], namespace,
                                     {"metadata": {"annotations": {K.NAMESPACE_STALLED_ANNOTATION: value}}})
            except ApiError as exc:  # a namespace being deleted: nothing left to report
                log.warning("stalled TrainJobs of namespace %s not recorded: %s", namespace, exc)

    def flag(self, trainjob: dict, why: str, since_s: float) -> None:
        meta = trainjob["metadata"]
        suspend = self.action == "suspend"
        message = why + ("; suspended by the platform (resume with spec.suspend: false)" if suspend else "")
        self.api.event({**trainjob, "apiVersion": K.TRAINER_API_VERSION, "kind": "TrainJob"}, REASON, message,
                       component="trainyard-stalls", name=f"{meta['name']}.stalled.{meta['uid'][:8]}.{int(since_s)}")
        if suspend and not (trainjob.get("spec") or {}).get("suspend"):
            try:
                self.api.merge_patch(RESOURCES["TrainJob"], meta["name"], {"spec": {"suspend": True}},
                                     meta["namespace"])
                log.info("suspended stalled TrainJob %s/%s: %s", meta["namespace"], meta["name"], why)
            except ApiError as exc:
                log.warning("stalled TrainJob %s/%s not suspended: %s", meta["namespace"], meta["name"], exc)

    def last_log(self, pods: list[dict]) -> float | None:
        """The last log line's time of the TrainJob's first pod (by name); None when the log cannot be read."""
        pod = min(pods, key=lambda p: p["metadata"]["name"])
        container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", "")
        path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}/log"
        try:
            return last_log_time(self.api.get_text(path, {"container": container, "tailLines": "1",
                                                           "timestamps": "true"}))
        except ApiError:
            return None  # a simulated node serves no logs; an unreadable log is no evidence
