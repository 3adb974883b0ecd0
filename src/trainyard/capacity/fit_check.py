"""`trainyard fit`'s checks against the live platform, in order: admission, runtime, build, quota, dry-run
create (the TrainJob, its PodGroup and the Jobs its JobSet will make), queue, priority, placement. Returns the printed lines and the exit code; the command only prints."""

from __future__ import annotations

from functools import cached_property

from trainyard import k8s as K
from trainyard.controller.build import build_objects
from trainyard.toolchain.flux_templates import read_flux_templates
from trainyard.controller.errors import ControllerError

from . import estimates, live
from .fit import REFUSED, Gang, check_quota, exit_code, fit, gang_from_objects, job_refusal_hint, jobs_of, priority_note
from trainyard.scheduling.cluster_state import Node, QueueUse, hard_tier, lost_nodes, nodes_from, number, queue_uses
from trainyard.scheduling.estimate import DEFAULT_RUN_S

EXIT_FITS, EXIT_WAITS, EXIT_REFUSED = 0, 1, 2


def display_name(trainjob: dict) -> str:
    """namespace/name; a file that leaves the name to the API server (`generateName`) shows the prefix and `*`."""
    meta = trainjob.get("metadata") or {}
    name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "(no name)")
    return f"{meta.get('namespace', 'default')}/{name}"


def run_fit(trainjob: dict, kubeconfig: str | None, default_run_s: float = DEFAULT_RUN_S,
            explain: bool = False) -> tuple[list[str], int]:
    """The printed lines and the exit code; a gang that waits gets a start estimate (`capacity.estimates`), and with
    `explain` one that waits or can never start the smallest changes that make it fit (`capacity.explain`)."""
    api = live.RememberedReads(live.connect(kubeconfig))
    ns = trainjob["metadata"]["namespace"]
    for resource, name, namespace in live.fit_reads(trainjob):
        api.prefetch(resource, name, namespace)
    # the cluster-wide lists take the longest (seconds at 1,000 nodes): they go out first, while the checks
    # before the placement (admission, runtime, build, dry-run creates) ask their own questions
    # (no Events: fit names no other gang's reason)
    snapshot = live.Background(live.snapshot, api, ns, podgroup_events=False)
    priorities = live.Background(live.priority_values, api)
    lines = [f"TrainJob {display_name(trainjob)}"]
    errors, warnings = live.admission(api, trainjob, quotas=False)
    lines += [f"  warning: {w}" for w in warnings]
    if errors:
        return lines + [f"refused: admission: {e}" for e in errors], EXIT_REFUSED
    runtime = live.fetch_runtime(api, trainjob)
    if runtime is None:
        ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
        return lines + [f"refused: runtime {ref.get('kind', 'ClusterTrainingRuntime')} {ref.get('name')} not found"], \
            EXIT_REFUSED
    try:
        templates = live.claim_templates(api, trainjob)
        objects = build_objects(trainjob, runtime, live.namespace_object(api, ns) + templates,
                                flux_templates=read_flux_templates)
        gang = gang_from_objects(objects, templates)
    except (ControllerError, ValueError) as err:
        return lines + [f"refused: the controller cannot build it: {err}"], EXIT_REFUSED
    topology = f", networkTopology {gang.topology}" if gang.topology else ""
    gang_line = (f"gang: {len(gang.pods)} pod{'s' if len(gang.pods) != 1 else ''}, {_resources(gang.total)}, "
                 f"{gang.queue_text}, priority class {gang.priority_class or '-'}{topology}{claims_text(gang)}")
    # the dry-run creates go out now, together, while the lists are read; their answers are taken in order below
    group = next((o for o in objects if o.get("kind") == "PodGroup"), None)
    volcano_group = group if group is not None and group.get("apiVersion") == live.PODGROUPS.api_version else None
    trainjob_create = live.Background(live.dry_run_create, api, trainjob, live.TRAINJOBS)
    group_create = live.Background(live.dry_run_create, api, volcano_group, live.PODGROUPS) if volcano_group else None
    job_creates = [(job, live.Background(live.dry_run_create, api, job, live.JOBS)) for job in jobs_of(objects)]
    snap = snapshot.result()
    reads = LiveReads(api, snap, default_run_s, priorities)
    never = check_quota(gang, snap.quotas)
    if never is not None and never.outcome == REFUSED:  # admission refuses it at create in these words
        told = lines + [gang_line, never.line]
        if explain:
            nodes, queues = capacity_of(snap)
            told += explanation(reads, gang, nodes, queues, never, framework_of(runtime))
        return told, exit_code(never)
    refusal = trainjob_create.result()
    if refusal:
        return lines + [f"refused: the API server: {refusal}"], EXIT_REFUSED
    lines.append("ok: admitted (trainyard admission; server-side dry-run create: RBAC, webhooks, quota on TrainJobs)")
    if group_create is not None:
        refusal = group_create.result()
        if refusal and "cannot create resource" not in refusal:  # RBAC: only the controller creates PodGroups
            return lines + [f"refused: its PodGroup: {refusal}"], EXIT_REFUSED
    for job, job_create in job_creates:  # the API server admits the TrainJob and JobSet; a Job's pod template it
        refusal = job_create.result()    # checks only when the JobSet controller creates it
        if refusal and "cannot create resource" not in refusal:  # RBAC: a user need not create Jobs
            return lines + [f"refused: the JobSet controller could not create its Job {job['metadata']['name']}: "
                            f"{refusal}{job_refusal_hint(refusal)}"], EXIT_REFUSED
    lines.append(gang_line)
    nodes, queues = capacity_of(snap)
    verdicts = fit(gang, snap.quotas, queues, nodes)
    final = verdicts[-1]
    passed = {"quota": "ok: quota", "queue": "ok: queue"}
    for check in ("quota", "queue") if gang.in_volcano else ("quota",):
        if final.check == check:
            break
        lines.append(passed[check] + _queue_note(check, gang, queues))
    if final.check != "quota" and gang.in_volcano:
        lines.append("  " + priority_note(gang, queues.get(gang.queue or "default"), reads.priorities))
    code = exit_code(final)
    if code == EXIT_WAITS and gang.in_volcano:  # above the verdict, which stays the last line
        lines.append("  " + start_estimate(reads, gang))
    lines.append(final.line)
    if explain and code != EXIT_FITS:
        lines += explanation(reads, gang, nodes, queues, final, framework_of(runtime))
    return lines, code


class LiveReads:
    """What fit reads beyond its snapshot, each at most once: PriorityClass values, the estimate model's inputs."""

    def __init__(self, api, snap: live.Snapshot, default_run_s: float, priorities: live.Background[dict[str, int]]):
        self.api, self.snap, self.default_run_s = api, snap, default_run_s
        self._priorities = priorities  # read since fit began

    @cached_property
    def priorities(self) -> dict[str, int]:
        return self._priorities.result()

    @cached_property
    def estimate_inputs(self) -> estimates.EstimateInputs:
        return live.estimate_inputs(self.api, self.snap, self.default_run_s, self.priorities)

    def extra_gang(self, gang, priority_class: str | None) -> estimates.PendingGang:
        """`gang` (not created yet) as the estimate model takes it, with `priority_class`'s value."""
        return estimates.gang_to_estimate(gang.namespace, gang.name or "(new)", gang.queue, gang.pods, gang.topology,
                                          self.priorities.get(priority_class or "", 0), self.default_run_s)


def capacity_of(snap: live.Snapshot) -> tuple[list[Node], dict[str, QueueUse]]:
    """(nodes with what their pods use, queues with their use and waiting gangs) of a snapshot. Not why each gang
    waits: fit names no other gang's reason (judging 6,000 waiting gangs took half a second)."""
    return nodes_from(snap.nodes, snap.pods, snap.hypernodes), queue_uses(snap.queues, snap.pod_groups, snap.pods,
                                                                               lost=lost_nodes(snap.nodes))


def framework_of(runtime: dict) -> str | None:
    return ((runtime.get("metadata") or {}).get("labels") or {}).get(K.LABEL_FRAMEWORK)


def explanation(reads: LiveReads, gang, nodes, queues, verdict, framework: str | None) -> list[str]:
    """`fit --explain`: the changes that fit now (checked by fit's own checks), then granted priority classes that
    move the gang up its queue (checked by the start-estimate model). `framework`: the runtime's, to name the
    runtimes of another topology tier."""
    from trainyard.capacity import explain
    from trainyard.controller.tenant_namespace import tenant_policy
    from trainyard.timestamps import duration_words
    from trainyard.scheduling.estimate import phrase

    given = reads.estimate_inputs
    remaining = {g.key: g.remaining_s for g in given.running}
    running = explain.holders(reads.snap.pods, given.queue_of, remaining)
    namespace = next(iter(live.namespace_object(reads.api, gang.namespace)), {})
    runtimes = None
    if hard_tier(gang.topology) is not None:
        runtimes = explain.usable_runtimes(live.runtimes_for(reads.api, gang.namespace), gang.namespace,
                                           tenant_policy(namespace or None).catalog_version, framework)
    found = explain.explain(gang, reads.snap.quotas, queues, nodes, running, duration_words, runtimes)
    out = ["changes that make it fit now:" if found else "no single change makes it fit now (fewer nodes, a wider "
           "topology tier, or the end of up to three running jobs)"]
    out += [f"  - {line}" for line in found]
    granted = [c for c in ((namespace.get("metadata") or {}).get("annotations") or {}).get(
        K.NAMESPACE_PRIORITY_CLASSES_ANNOTATION, "").split(",") if c]
    if gang.in_volcano and explain.priority_can_help(verdict):
        for name in explain.higher_priorities(gang.priority_class, granted, reads.priorities):
            extra = reads.extra_gang(gang, name)
            out.append(f"  - priority class {name} (granted to {gang.namespace}): "
                       f"{phrase(estimates.estimates(given, extra)[extra.key])}")
    return out


def start_estimate(reads: LiveReads, gang) -> str:
    """`estimate: starts in about 12 min, position 3 in queue team-a`, the gang behind every gang waiting now."""
    from trainyard.scheduling.estimate import phrase

    skipped = estimates.too_many_to_estimate(estimates.waiting_count(reads.snap.pod_groups))
    if skipped:  # decided before listing every TrainJob, as report does
        return f"estimate: {skipped}"
    extra = reads.extra_gang(gang, gang.priority_class)
    found = estimates.estimates(reads.estimate_inputs, extra)[extra.key]
    if found.guessed:  # no time to qualify
        return f"estimate: {phrase(found)}"
    return f"estimate: {phrase(found)} ({estimates.ASSUMPTION.format(minutes=reads.default_run_s / 60)})"


def _queue_note(check: str, gang, queues) -> str:
    if check != "queue":
        return ""
    queue = queues.get(gang.queue or "default")
    gpus = (queue.capability.get(K.GPU_RESOURCE) if queue else None)
    if queue is None or gpus is None:
        return ""
    return (f" {queue.name}: capability {K.GPU_RESOURCE} {number(gpus)}, allocated "
            f"{number(queue.allocated.get(K.GPU_RESOURCE, 0))}, this job needs {number(gang.total.get(K.GPU_RESOURCE, 0))}")


def _resources(values: dict) -> str:
    return ", ".join(f"{k} {number(v)}" for k, v in sorted(values.items())) or "no requests"


def claims_text(gang: Gang) -> str:
    """The devices the gang claims through DRA, said beside its requests: the quota counts them, Volcano's queues
    and the nodes' extended resources (what the checks below model) do not."""
    if not gang.claimed_devices:
        return ""
    devices = ", ".join(f"{key.removesuffix(K.DRA_DEVICES_QUOTA_SUFFIX)} {number(count)}"
                        for key, count in sorted(gang.claimed_devices.items()))
    return f"; claims through DRA: {devices} (counted by quotas, not by queues or node capacity)"
