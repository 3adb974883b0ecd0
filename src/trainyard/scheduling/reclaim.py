"""Which whole jobs to evict so a starving gang fits (pure): gang-aware reclaim.

Elastic queues (Volcano `capacity`) lend idle GPUs to whoever can use them; without taking them back, a queue
whose jobs arrive later, or need a whole rack, stays below its share for as long as the borrowers run. Volcano
v1.14's `reclaim` evicts task by task, which breaks gangs (volcano#4607); v1.15 announces a gang-aware one.
This plans trainyard's: the gang of the queue furthest below its deserved share that has waited `after_s`,
whose queue stays within its share with it, gets the `pods` nodes of one allowed domain (rack for tier 1,
spine for tier 2, anywhere for none) that its pods may use (`scheduling.placement`) and that lose the least work to free
(GPUs x seconds since each victim's last checkpoint, since its start without one; then the fewest GPUs), by evicting whole jobs of queues
above their deserved share, each of which stays at or above it. The live loop (`capacity.reclaimer`) suspends
and resumes the victims' TrainJobs; `scheduling.simulator` replays it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Mapping, Sequence

from trainyard.scheduling.checkpoints import Checkpoint, saved_seconds
from trainyard.scheduling.cluster_state import GPU, Node, active_pods_by_group, first_start_s, pod_group_queues, pod_resources
from trainyard.scheduling.reservation import WaitingGang, domain_of
from trainyard.tenant_policy import RECLAIM_RULES

JobKey = tuple[str, str]

DESERVED, FINAL_SHARE, FAIR_SHARING = RECLAIM_RULES
"""Reclaim rules. `deserved`: a gang starves when its queue stays within its deserved share with it, and a victim's
queue must stay at or above its own without the victim. `final-share` (Kueue's fair-sharing
`LessThanOrEqualToFinalShare`): a gang starves when its queue is below its share, and a victim's queue must keep
a share (held / deserved) at least the gang's queue's share with the gang; shares converge without big gangs
being locked out by their size. `fair-sharing`: Kueue's two fair-sharing strategies in its default order, that one
first and, where it frees no domain, `LessThanInitialShare`: a victim's queue must hold, until its last victim goes,
a share above the gang's queue's share with the gang (measured on the trace: the heavy queue's 7-8 node gangs
otherwise waited for its own jobs to end, its queue 5 points short, since a lender at its share with them could
give nothing)."""
DESERVED_TARGET, FAIR_TARGET = "deserved", "fair"
"""The share reclaim restores: each queue's static deserved GPUs, or its weight water-filled against current demand
(`scheduling.fairness.fair_deserved`: what the trace bench measures queues against)."""
RULES, TARGETS = RECLAIM_RULES, (DESERVED_TARGET, FAIR_TARGET)
RECLAIM_AFTER_S = 10.0
"""Seconds a gang waits before reclaim acts for it (the controller's loop; what `trainyard whatif` replays)."""


@dataclass(frozen=True)
class RunningJob:
    key: JobKey
    """(namespace, name) of its PodGroup (= its TrainJob's name)."""
    queue: str
    gpus: Fraction
    """GPUs its bound pods hold, all nodes together."""
    nodes: frozenset[str]
    ran_s: float = 0.0
    """How long it has held its GPUs."""
    saved_s: float = 0.0
    """Of `ran_s`, the seconds its last checkpoint kept (0: it saved none, or reports none)."""

    @property
    def lost_work(self) -> float:
        """GPU-seconds an eviction now throws away: everything since its last checkpoint (since its start without
        one)."""
        return float(self.gpus) * max(0.0, self.ran_s - self.saved_s)


@dataclass(frozen=True)
class Eviction:
    gang: JobKey
    victims: tuple[JobKey, ...]
    nodes: tuple[str, ...]
    """Where the gang will fit once the victims are gone."""


def starving_gangs(gangs: Iterable[WaitingGang], allocated: Mapping[str, Fraction], deserved: Mapping[str, Fraction],
                   after_s: float, rule: str = DESERVED) -> list[WaitingGang]:
    """Gangs that waited `after_s` in a queue that stays within its deserved share with them (`final-share`: in
    a queue below its share, whatever the gang's size): lowest queue share first, then the longest wait."""
    out = []
    for gang in gangs:
        owed = deserved.get(gang.queue, Fraction(0))
        held = allocated.get(gang.queue, Fraction(0))
        within = held < owed if rule != DESERVED else held + gang.pods * gang.gpus_per_pod <= owed
        if owed > 0 and gang.waiting_s >= after_s and within:
            out.append((held / owed, -gang.waiting_s, gang.key, gang))
    return [gang for *_, gang in sorted(out, key=lambda o: o[:3])]


def share(held: Fraction, owed: Fraction) -> Fraction:
    return held / owed if owed > 0 else Fraction(10**9)


@dataclass(frozen=True)
class ShareGuard:
    """What a victim's queue must keep. No `floor`: its deserved GPUs, without the victims. With one: a share
    (held / deserved) of at least `floor` without the victims (final share) or, `initial`, above `floor` until
    its last victim goes (the smallest last)."""
    floor: Fraction | None = None
    initial: bool = False

    def allows(self, held: Fraction, owed: Fraction, taken: Fraction, last: Fraction) -> bool:
        if self.floor is None:
            return held - taken >= owed
        if self.initial:
            return share(held - taken + last, owed) > self.floor
        return share(held - taken, owed) >= self.floor


def keeps_its_share(queue: str, taken: Fraction, allocated: Mapping[str, Fraction], deserved: Mapping[str, Fraction],
                    guard: ShareGuard = ShareGuard(), last: Fraction | None = None) -> bool:
    """The queue keeps what `guard` asks once `taken` GPUs go (`last`: its smallest victim's, default all)."""
    return guard.allows(allocated.get(queue, Fraction(0)), deserved.get(queue, Fraction(0)), taken,
                        taken if last is None else last)


def evictable(job: RunningJob, allocated: Mapping[str, Fraction], deserved: Mapping[str, Fraction],
              guard: ShareGuard = ShareGuard()) -> bool:
    """A job whose queue keeps its share without it."""
    return keeps_its_share(job.queue, job.gpus, allocated, deserved, guard)


def guards(rule: str, gang: WaitingGang, allocated: Mapping[str, Fraction],
           deserved: Mapping[str, Fraction]) -> tuple[ShareGuard, ...]:
    """The guards `rule` tries, in order, for `gang`."""
    if rule == DESERVED:
        return (ShareGuard(),)
    floor = share(allocated.get(gang.queue, Fraction(0)) + gang.pods * gang.gpus_per_pod,
                  deserved.get(gang.queue, Fraction(0)))
    final = ShareGuard(floor)
    return (final,) if rule == FINAL_SHARE else (final, ShareGuard(floor, initial=True))


def cheapest_eviction(nodes: Sequence[Node], gang: WaitingGang, running: Sequence[RunningJob],
                      allocated: Mapping[str, Fraction], deserved: Mapping[str, Fraction],
                      protected: frozenset[JobKey] = frozenset(), rule: str = DESERVED) -> Eviction | None:
    """The allowed domain whose `pods` cheapest nodes free up for the least work lost (what each victim's last
    checkpoint did not keep: a job that reports none loses all it did, so it is taken last), then the fewest evicted
    GPUs (ties: domain name), under the first of `rule`'s guards
    that frees one. A node counts when it already has room for one pod, or when every job on it may be evicted
    (none `protected`); the victims of one queue together must leave it what the guard asks."""
    for guard in guards(rule, gang, allocated, deserved):
        eviction = _cheapest_eviction(nodes, gang, running, allocated, deserved, protected, guard)
        if eviction is not None:
            return eviction
    return None


def _cheapest_eviction(nodes: Sequence[Node], gang: WaitingGang, running: Sequence[RunningJob],
                       allocated: Mapping[str, Fraction], deserved: Mapping[str, Fraction],
                       protected: frozenset[JobKey], guard: ShareGuard) -> Eviction | None:
    on_node: dict[str, list[RunningJob]] = {}
    for job in running:
        for name in job.nodes:
            on_node.setdefault(name, []).append(job)
    domains: dict[str, list[tuple[Fraction, str, frozenset[JobKey]]]] = {}
    by_key = {job.key: job for job in running}
    for node in nodes:
        if not node.schedulable or node.allocatable.get(GPU, Fraction(0)) < gang.gpus_per_pod or not gang.may_use(node):
            continue
        jobs = on_node.get(node.name, [])
        option: tuple[Fraction, str, frozenset[JobKey]]
        if node.free() >= gang.gpus_per_pod:
            option = (Fraction(0), node.name, frozenset())
        elif jobs and all(job.key not in protected and evictable(job, allocated, deserved, guard) for job in jobs):
            option = (sum((job.gpus for job in jobs), Fraction(0)), node.name, frozenset(job.key for job in jobs))
        else:
            continue
        domains.setdefault(domain_of(node, gang.tier), []).append(option)
    best: tuple[Fraction, float, str, Eviction] | None = None
    for domain, options in sorted(domains.items()):
        if len(options) < gang.pods:
            continue
        # least work lost, then fewest GPUs; then the nodes of the same victims together (a job over two nodes
        # frees both for one eviction), then by name. On bench/goodput.py's traces, with victims asked to save
        # first, fewest GPUs first lost more work and kept less goodput on average over the seeds
        chosen = sorted(options, key=lambda o: (sum(by_key[k].lost_work for k in o[2]), o[0], sorted(o[2]),
                                                o[1]))[:gang.pods]
        victims = frozenset().union(*(keys for _, _, keys in chosen))
        if not _queues_keep_their_share(victims, by_key, allocated, deserved, guard):
            continue
        cost = sum((by_key[key].gpus for key in victims), Fraction(0))
        lost = sum(by_key[key].lost_work for key in victims)
        if best is None or (lost, cost, domain) < (best[1], best[0], best[2]):
            best = (cost, lost, domain, Eviction(gang.key, tuple(sorted(victims)), tuple(sorted(n for _, n, _ in chosen))))
    return None if best is None else best[3]


def _queues_keep_their_share(victims: Iterable[JobKey], by_key: Mapping[JobKey, RunningJob],
                             allocated: Mapping[str, Fraction], deserved: Mapping[str, Fraction],
                             guard: ShareGuard) -> bool:
    """All victims of a queue together leave it what `guard` asks."""
    taken: dict[str, list[Fraction]] = {}
    for key in victims:
        taken.setdefault(by_key[key].queue, []).append(by_key[key].gpus)
    return all(keeps_its_share(queue, sum(gpus, Fraction(0)), allocated, deserved, guard, min(gpus))
               for queue, gpus in taken.items())


def plan(nodes: Sequence[Node], gangs: Iterable[WaitingGang], running: Sequence[RunningJob],
         allocated: Mapping[str, Fraction], deserved: Mapping[str, Fraction], after_s: float,
         protected: frozenset[JobKey] = frozenset(), rule: str = DESERVED) -> Eviction | None:
    """The one eviction to make now, for the first starving gang that some domain can make room for (None: no
    gang starves, or it already fits somewhere and only waits for the scheduler's next cycle). `protected` jobs
    are never victims (for example those already evicted once)."""
    for gang in starving_gangs(gangs, allocated, deserved, after_s, rule):
        eviction = cheapest_eviction(nodes, gang, running, allocated, deserved, protected, rule)
        if eviction is not None:
            return eviction if eviction.victims else None
    return None


def running_jobs(pods: Iterable[dict], pod_groups: Iterable[dict], evictable_keys: set[JobKey],
                 now_s: float | None = None, saved_at: Mapping[JobKey, float] | None = None) -> list[RunningJob]:
    """Jobs whose bound, active pods hold GPUs, by PodGroup (its queue); only `evictable_keys` (TrainJobs
    that can be suspended) are returned. With `now_s` (epoch seconds), each has run since its first pod started,
    and kept what its last checkpoint (`saved_at`, epoch seconds, by job) saved since then."""
    queue_of = pod_group_queues(pod_groups)
    out = []
    for key, members in sorted(active_pods_by_group(pods).items()):
        holding = [pod for pod in members if pod_resources(pod).get(GPU, Fraction(0)) > 0]
        if key not in evictable_keys or key not in queue_of or not holding:
            continue
        started = first_start_s(holding) if now_s is not None else None
        ran = max(0.0, now_s - started) if now_s is not None and started is not None else 0.0
        at = (saved_at or {}).get(key)
        saved = saved_seconds(None if at is None else Checkpoint(at), started, now_s) if now_s is not None else 0.0
        out.append(RunningJob(key, queue_of[key], sum((pod_resources(pod)[GPU] for pod in holding), Fraction(0)),
                              frozenset(pod["spec"]["nodeName"] for pod in holding), ran, saved))
    return out


def reclaimed_note(gang: JobKey, at: float) -> str:
    """The annotation a victim carries while suspended for `gang` (so a restarted loop knows to resume it)."""
    return f"{gang[0]}/{gang[1]} {at:.0f}"


def parse_reclaimed_note(text: str) -> tuple[JobKey, float] | None:
    try:
        gang, at = text.split(" ", 1)
        namespace, name = gang.split("/", 1)
        return (namespace, name), float(at)
    except ValueError:
        return None


def to_resume(notes: Mapping[JobKey, str], placed_or_gone: set[JobKey], now: float, timeout_s: float) -> list[JobKey]:
    """Victims to resume: their gang is placed or gone, or waited `timeout_s` since the eviction (a gang that
    still does not fit must not keep other jobs suspended for ever); unreadable notes are resumed too."""
    out = []
    for victim, text in notes.items():
        parsed = parse_reclaimed_note(text)
        if parsed is None or parsed[0] in placed_or_gone or now - parsed[1] >= timeout_s:
            out.append(victim)
    return sorted(out)
