"""Reading a window's usage record from Prometheus: the PromQL (pure), the answers turned into a record (pure), and
the thin HTTP client between them.

Every query is instant, at the window's end, over the window (`last_over_time(...[W])`): what was last known of
each pod, TrainJob, namespace and queue that appeared in it; only the entitlement is read as a range, because it
is a level that changes over time.
"""

from __future__ import annotations

import json
import math
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Sequence

from trainyard import k8s as K
from trainyard.tenant_policy import Budget
from trainyard.cluster import monitoring as M
from trainyard.errors import TrainyardError
from trainyard.usage.record import (OUTCOMES, Demand, PodSpan, Tenancy, TrainJobFacts, UsageRecord, counter_increase,
                                    pod_end)

POD = ("namespace", "pod", "uid")
FINISHED_PHASES = 'phase=~"Succeeded|Failed"'
JOBSET_LABEL = M.series_label(M.POD_LABELS[0])
TENANT_LABEL, QUEUE_LABEL, CATALOG_LABEL = (M.series_label(label) for label in M.NAMESPACE_LABELS)
BUDGET_LABEL = M.annotation_label(K.NAMESPACE_BUDGET_ANNOTATION)
MOST_ENTITLEMENT_POINTS = 5000
RECLAIM_LOST = "trainyard_reclaim_lost_gpu_seconds_total"
"""The controller's counter of work its reclaim threw away (`controller.runtime.manager.Metrics.reclaim_lost`)."""
"""Range reads of a queue's entitlement take at most this many steps (Prometheus refuses above 11,000)."""


class UsageError(TrainyardError):
    pass


def window(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds))}s"


selector = M.plain_series


def namespace_matcher(namespaces: Sequence[str] | None) -> str:
    """A matcher for these namespaces (DNS labels: nothing to escape); "" for every namespace."""
    return "" if namespaces is None else f'namespace=~"{"|".join(sorted(namespaces))}"'


def pod_span_queries(since: float, until: float, namespaces: Sequence[str] | None = None) -> dict[str, str]:
    """Name -> PromQL for the spans GPU pods held (of these namespaces only, when given), each evaluated at `until`."""
    w, only = window(until - since), namespace_matcher(namespaces)

    def last(metric: str, *matchers: str) -> str:
        return f"last_over_time({selector(metric, *matchers, only)}[{w}])"

    return {
        # one series per container and node: a pod seen pending (node "") then bound has two; max, then sum
        "gpus": M.held_gpus(", ".join(POD), last),
        "start": f"last_over_time({selector('kube_pod_start_time', only)}[{w}])",
        "present": selector("kube_pod_start_time", only),
        "completion": f"last_over_time({selector('kube_pod_completion_time', only)}[{w}])",
        # kube-state-metrics dates completion from the first container that ends, even while others run
        "finished": f'max by (namespace, pod, uid) ({last("kube_pod_status_phase", FINISHED_PHASES)}) == 1',
        "deletion": f"last_over_time({selector('kube_pod_deletion_timestamp', only)}[{w}])",
        "last_seen": f"ts_of_last_over_time({selector('kube_pod_start_time', only)}[{w}])",
    }


def instant_queries(since: float, until: float) -> dict[str, str]:
    """Name -> PromQL, each evaluated at `until`."""
    w = window(until - since)
    gpu = f'resource="{M.GPU_METRIC_RESOURCE}"'
    return {
        **pod_span_queries(since, until),
        "jobset": f'last_over_time(kube_pod_labels{{{JOBSET_LABEL}!=""}}[{w}])',
        "priority": f'max by (namespace, pod, uid, priority_class) (last_over_time(kube_pod_info{{priority_class!=""}}[{w}]))',
        "namespaces": f"last_over_time(kube_namespace_labels[{w}])",
        "trainjob_info": f"last_over_time({M.TRAINJOB_PREFIX}_info[{w}])",
        "trainjob_created": f"last_over_time({M.TRAINJOB_PREFIX}_created[{w}])",
        "trainjob_outcome": (f'last_over_time({M.TRAINJOB_PREFIX}_condition{{type=~"{"|".join(OUTCOMES)}"}}[{w}]) '
                             f"== 1"),
        "trainjob_outcome_time": f'last_over_time({M.TRAINJOB_PREFIX}_condition_time{{type=~"{"|".join(OUTCOMES)}"}}[{w}])',
        "trainjob_last_seen": f"ts_of_last_over_time({M.TRAINJOB_PREFIX}_created[{w}])",
        "podgroup_gpus": f"last_over_time({M.PODGROUP_PREFIX}_min_gpus[{w}])",
        "queue_weight": f"last_over_time({M.QUEUE_PREFIX}_weight[{w}])",
        "capacity": f'sum(last_over_time(kube_node_status_allocatable{{{gpu}}}[{w}]))',
        "budgets": f'kube_namespace_annotations{{{BUDGET_LABEL}!=""}}',  # the namespaces there now
        # the controller's counter, read at both ends of the window (a series born inside it started at 0)
        "reclaim_lost_end": f"last_over_time({RECLAIM_LOST}[{w}])",
        "reclaim_lost_start": f"{RECLAIM_LOST} offset {w}",
    }


def reclaim_lost(answers: dict[str, list[dict]]) -> dict[str, float]:
    """Namespace -> GPU-seconds the reclaim loop counted lost in the window (every controller replica's series)."""
    def readings(name: str) -> dict[str, dict[tuple[str, ...], float]]:
        out: dict[str, dict[tuple[str, ...], float]] = {}
        for series in answers.get(name, []):
            labels = series["metric"]
            key = tuple(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__")
            out.setdefault(labels.get("namespace", ""), {})[key] = float(series["value"][1])
        return out

    start = readings("reclaim_lost_start")
    return {namespace: counter_increase(end, start.get(namespace, {}))
            for namespace, end in readings("reclaim_lost_end").items()}


def entitlement_step(since: float, until: float) -> float:
    return max(float(M.SCRAPE_INTERVAL_S), math.ceil((until - since) / MOST_ENTITLEMENT_POINTS))


def _by(series: list[dict], labels: tuple[str, ...]) -> dict[tuple[str, ...], tuple[dict, float]]:
    return {tuple(s["metric"].get(label, "") for label in labels): (s["metric"], float(s["value"][1]))
            for s in series}


def build_record(answers: dict[str, list[dict]], entitlement: list[dict], since: float, until: float) -> UsageRecord:
    """A record from the answers to `instant_queries` and the entitlement's range answer."""
    pods = pod_spans(answers)
    namespaces = {}
    for series in answers["namespaces"]:
        labels = series["metric"]
        if labels.get(QUEUE_LABEL) or labels.get(TENANT_LABEL):
            namespaces[labels["namespace"]] = Tenancy(tenant=labels.get(TENANT_LABEL) or labels["namespace"],
                                                      queue=labels.get(QUEUE_LABEL, ""),
                                                      catalog=labels.get(CATALOG_LABEL, ""))
    facts = trainjob_facts(answers)
    return UsageRecord(since=since, until=until, pods=pods, trainjobs=facts, namespaces=namespaces,
                       entitlement={s["metric"].get("queue", ""): [(float(t), float(v)) for t, v in s["values"]]
                                    for s in entitlement},
                       demands=demands(answers, facts), weights={
                           metric.get("queue", ""): value for (metric, value) in _by(answers["queue_weight"],
                                                                                     ("queue",)).values()},
                       capacity=sum(float(s["value"][1]) for s in answers["capacity"]),
                       budgets={s["metric"]["namespace"]: budget for s in answers["budgets"]
                                if (budget := Budget.from_annotation(s["metric"].get(BUDGET_LABEL)))},
                       reclaim_lost=reclaim_lost(answers))


def pod_spans(answers: dict[str, list[dict]]) -> list[PodSpan]:
    """The spans of the GPU pods in the answers to `pod_span_queries` (and, when asked, "jobset" and "priority")."""
    gpus = {key: value for key, (_, value) in _by(answers["gpus"], POD).items() if value > 0}
    starts = {key: value for key, (_, value) in _by(answers["start"], POD).items()}
    present = set(_by(answers["present"], POD))
    finished = set(_by(answers["finished"], POD))
    completion, deletion, last_seen = ({key: value for key, (_, value) in _by(answers[name], POD).items()}
                                       for name in ("completion", "deletion", "last_seen"))
    jobsets = {key: metric.get(JOBSET_LABEL, "") for key, (metric, _) in _by(answers.get("jobset", []), POD).items()}
    classes = {key: metric.get("priority_class", "")
               for key, (metric, _) in _by(answers.get("priority", []), POD).items()}
    return [PodSpan(namespace=key[0], pod=key[1], gpus=count, start=starts[key],
                    end=pod_end(completion.get(key) if key in finished else None, deletion.get(key),
                                last_seen.get(key), key in present),
                    trainjob=jobsets.get(key, ""), priority_class=classes.get(key, ""))
            for key, count in sorted(gpus.items()) if key in starts]


def demands(answers: dict[str, list[dict]], facts: list[TrainJobFacts]) -> list[Demand]:
    """Each TrainJob whose PodGroup asked for GPUs: from its creation to its outcome, else to when its series was
    last seen (deleted, or still there when the window closed)."""
    gangs = {key: value for key, (_, value) in _by(answers["podgroup_gpus"], ("namespace", "podgroup")).items()}
    last_seen = {key: value for key, (_, value) in _by(answers["trainjob_last_seen"], ("namespace", "trainjob")).items()}
    out = []
    for job in facts:
        key = (job.namespace, job.name)
        gpus = gangs.get(key, 0.0)
        if gpus <= 0 or job.created is None:
            continue
        end = job.finished if job.outcome else last_seen.get(key)
        out.append(Demand(job.namespace, job.name, gpus, job.created, end))
    return out


def trainjob_facts(answers: dict[str, list[dict]]) -> list[TrainJobFacts]:
    key = ("namespace", "trainjob")
    info = _by(answers["trainjob_info"], key)
    created = _by(answers["trainjob_created"], key)
    outcomes = {k: metric.get("type", "") for k, (metric, _) in _by(answers["trainjob_outcome"], key).items()}
    times = {k[:2]: value for k, (_, value) in _by(answers["trainjob_outcome_time"], (*key, "type")).items()
             if outcomes.get(k[:2]) == k[2]}
    last_seen = {k: value for k, (_, value) in _by(answers["trainjob_last_seen"], key).items()}
    facts = []
    for name in sorted(set(info) | set(created)):
        labels = info.get(name, ({}, 0.0))[0]
        facts.append(TrainJobFacts(namespace=name[0], name=name[1], runtime=labels.get("runtime", ""),
                                   priority_class=labels.get("priority_class", ""),
                                   created=created[name][1] if name in created else None,
                                   outcome=outcomes.get(name, ""), finished=times.get(name),
                                   last_seen=last_seen.get(name)))
    return facts


@dataclass(frozen=True)
class Prometheus:
    """Prometheus' HTTP query API at `url`."""

    url: str
    timeout_s: float = 60.0

    def _get(self, path: str, params: dict[str, str]) -> list[dict]:
        address = f"{self.url.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(address, timeout=self.timeout_s) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise UsageError(f"Prometheus at {self.url} refused {params.get('query', '')!r}: {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise UsageError(f"cannot reach Prometheus at {self.url} ({exc}): start the local cluster with "
                             f"`make up`, or pass --prometheus URL of the platform's Prometheus") from exc
        if body.get("status") != "success":
            raise UsageError(f"Prometheus at {self.url} answered {body.get('error', body)!r}")
        return body["data"]["result"]

    def query(self, promql: str, at: float) -> list[dict]:
        return self._get("/api/v1/query", {"query": promql, "time": f"{at:.3f}"})

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict]:
        return self._get("/api/v1/query_range", {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                 "step": f"{step:g}"})


LAST_SEEN = {"last_seen": "kube_pod_start_time", "trainjob_last_seen": f"{M.TRAINJOB_PREFIX}_created"}


def last_seen_fallback(name: str, since: float, until: float, namespaces: Sequence[str] | None = None) -> str:
    """Without Prometheus' experimental functions (3.5+, `--enable-feature=promql-experimental-functions`): when a
    series was last seen, from a subquery, to within its step."""
    step = max(M.SCRAPE_INTERVAL_S, math.ceil((until - since) / MOST_ENTITLEMENT_POINTS))
    series = selector(LAST_SEEN[name], namespace_matcher(namespaces))
    return f"max_over_time(timestamp({series})[{window(until - since)}:{step}s])"


def ask(prometheus: Prometheus, queries: dict[str, str], since: float, until: float,
        namespaces: Sequence[str] | None = None) -> dict[str, list[dict]]:
    """Each query's answer at `until`; a last-seen query falls back to a subquery on a Prometheus without
    `ts_of_last_over_time`."""
    answers = {}
    for name, promql in queries.items():
        try:
            answers[name] = prometheus.query(promql, until)
        except UsageError as exc:
            if name not in LAST_SEEN or "ts_of_last_over_time" not in str(exc):
                raise
            answers[name] = prometheus.query(last_seen_fallback(name, since, until, namespaces), until)
    return answers


def read_record(prometheus: Prometheus, since: float, until: float) -> UsageRecord:
    """The usage record of [since, until] as Prometheus holds it."""
    answers = ask(prometheus, instant_queries(since, until), since, until)
    entitlement = prometheus.query_range(M.QUEUE_ENTITLED, since, until, entitlement_step(since, until))
    return build_record(answers, entitlement, since, until)


def read_pod_spans(prometheus: Prometheus, since: float, until: float, namespaces: Sequence[str]) -> list[PodSpan]:
    """Only the GPU pod spans of these namespaces over [since, until]: what a budget needs (6 queries, not 18)."""
    if not namespaces:
        return []
    return pod_spans(ask(prometheus, pod_span_queries(since, until, namespaces), since, until, namespaces))


def resolve_url(given: str | None, cluster_name: str) -> str:
    """The Prometheus to read: the one given, else $TRAINYARD_PROMETHEUS, else the running local cluster's."""
    from trainyard.cluster import local

    url = given or os.environ.get("TRAINYARD_PROMETHEUS") or local.status(cluster_name).get("prometheus")
    if not url:
        raise UsageError(f"no Prometheus to read: the local cluster {cluster_name!r} runs none (start it with "
                         f"`make up`); pass --prometheus URL (or set TRAINYARD_PROMETHEUS) for a platform's Prometheus")
    return url

