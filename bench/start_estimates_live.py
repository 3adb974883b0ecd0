#!/usr/bin/env python3
"""How right are the start estimates users are told, live: a generated trace of the local stack (seeds no
calibration used) replayed on a throw-away local cluster of its shape, through the real vc-scheduler, JobSet and
trainyard controllers, with the controller's start-estimate loop writing its TrainJobStartEstimate Events. For each
TrainJob that waited, the first estimate written on it (what its user saw first), and every later one, is compared
with when its first pod really bound.

Twice per seed: with the shipped default (no trainerStatus: the controller assumes its default run time) and with
every running TrainJob's trainer reporting the time it has left in trainerStatus (patched on the status subresource
as the trainer's `update_trainjob_status` does). Prints, per variant, the jobs that waited, the share told a time
(the rest are told there is no estimate), and over those told a time the median and p90 of the absolute error in
seconds and as a share of the wait still ahead when it was told; the same over every estimate written; asserts
nothing.

Usage: .venv/bin/python bench/start_estimates_live.py [--seeds 41,42] [--jobs 24] [--speedup 2] [--every 2]
       [--min-wait 10] [--variants shipped_default,trainer_status] [--port-base 28800] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from pathlib import Path

from trainyard import k8s as K
from trainyard.benchkit import run_record, write_results
from trainyard.capacity.estimate_scoring import figures, scored
from trainyard.capacity.start_estimator import REASON
from trainyard.paths import repo_root
from trainyard.platform.stack_source import read_stack_source
from trainyard.timestamps import format_time, utc_now
from trainyard.whatif.cluster_engine import run_on_cluster
from trainyard.whatif.scenario import scenario
from trainyard.whatif.stacks import load
from trainyard.whatif.workload import generated, tenants_of

CALIBRATION_SEEDS = (12, 13, 14, 7, 8, 9)
VARIANTS = ("shipped_default", "trainer_status")
POLL_S = 1.0


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="41,42")
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--speedup", type=float, default=2.0)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between the controller's estimate rounds")
    parser.add_argument("--min-wait", type=float, default=10.0, help="score jobs that waited at least this long")
    parser.add_argument("--port-base", type=int, default=28800)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    args.variants = args.variants.split(",")
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        parser.error(f"--variants {unknown}: use {', '.join(VARIANTS)}")
    args.seeds = [int(s) for s in args.seeds.split(",")]
    used = sorted(set(args.seeds) & set(CALIBRATION_SEEDS))
    if used:
        parser.error(f"--seeds {used}: used for calibration; pick seeds outside {CALIBRATION_SEEDS}")
    return args


class Observer:
    """Alongside the replay: every estimate the Event of each TrainJob held and, with `report`, every running
    TrainJob's trainerStatus (the time it has left, from its run time and when it was first seen running)."""

    def __init__(self, replay, durations: dict[str, float], report: bool):
        self.replay, self.durations, self.report = replay, durations, report
        self.told: dict[str, dict[str, dict]] = {}
        """TrainJob -> every estimate its Event held (keyed by when it was estimated)."""
        self.running_since: dict[tuple[str, str], float] = {}
        self.reports = 0
        self.stop = threading.Event()

    def _events(self) -> None:
        listed = self.replay.core.list_event_for_all_namespaces(field_selector=f"reason={REASON}")
        for event in listed.items:
            if event.involved_object.kind != "TrainJob":
                continue
            marks = event.metadata.annotations or {}
            at = marks.get(K.ESTIMATED_AT_ANNOTATION) or event.message
            estimates = self.told.setdefault(event.involved_object.name, {})
            if at not in estimates:
                estimates[at] = {"message": event.message, "seen_epoch": time.time(),
                                 "expected_epoch": _number(marks.get(K.EXPECTED_START_ANNOTATION)),
                                 "estimated_epoch": _number(marks.get(K.ESTIMATED_AT_ANNOTATION))}

    def _trainer_reports(self) -> None:
        now = time.time()
        pods = self.replay.core.list_pod_for_all_namespaces(label_selector=K.TRACE_JOB_LABEL).items
        for pod in pods:
            if pod.spec.node_name and pod.status and pod.status.phase == "Running":
                key = (pod.metadata.namespace, pod.metadata.labels[K.TRACE_JOB_LABEL])
                self.running_since.setdefault(key, now)
        for (namespace, name), since in self.running_since.items():
            run_s = self.durations.get(name)
            if run_s is None:
                continue
            left = max(0.0, run_s - (now - since))
            body = {"status": {"trainerStatus": {
                "progressPercentage": int(min(100, 100 * (now - since) / max(run_s, 1e-6))),
                "estimatedRemainingSeconds": int(round(left)), "lastUpdatedTime": format_time(utc_now())}}}
            try:
                self.replay.custom.patch_namespaced_custom_object_status(
                    K.TRAINER_GROUP, K.TRAINER_VERSION, namespace, K.TRAINJOBS, name, body)
                self.reports += 1
            except Exception:  # noqa: BLE001 - the TrainJob finished and went: nothing left to report
                pass

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self._events()
                if self.report:
                    self._trainer_reports()
            except Exception:  # noqa: BLE001 - a busy API server: look again next round
                pass
            self.stop.wait(POLL_S)

    @contextlib.contextmanager
    def alongside(self, replay):
        self.replay = replay
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stop.set()
            thread.join(timeout=10)


def _number(text: str | None) -> float | None:
    return None if text is None else float(text)


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    config = load(read_stack_source(repo_root() / "stacks" / "Pulumi.local.yaml"))
    scene = scenario(config)
    names = tenants_of({t.name: t for t in config.tenants})
    results: dict[str, dict] = {variant: {"per_seed": {}, "rows": []} for variant in args.variants}
    for seed in args.seeds:
        trace = generated(scene, names, seed, args.jobs)
        durations = {job.name: job.duration / args.speedup for job in trace}
        for variant in args.variants:
            print(f"seed {seed}, {variant}: {len(trace)} jobs", flush=True)
            observer = Observer(None, durations, report=variant == "trainer_status")
            run = run_on_cluster(config, scene, trace, speedup=args.speedup, port_base=args.port_base,
                                 echo=lambda line: print(line, flush=True),
                                 spec_changes={"start_estimates_every": args.every}, alongside=observer.alongside)
            rows = scored(run.record, observer.told, args.min_wait)
            found = figures(rows)
            found.update(events=sum(len(v) for v in observer.told.values()), trainer_reports=observer.reports,
                         unfinished=len(run.record.unfinished))
            results[variant]["per_seed"][seed] = found
            results[variant]["rows"] += [{"seed": seed, **row} for row in rows]
            print(f"  {variant}: {found}", flush=True)
    for variant in args.variants:
        results[variant].update(figures(results[variant]["rows"]))
        shown = {k: v for k, v in results[variant].items() if k not in ("rows", "per_seed")}
        print(f"{variant}: " + ", ".join(f"{k} {v}" for k, v in shown.items()))
    if args.out:
        record = run_record(["bench/start_estimates_live.py", *(sys.argv[1:] if argv is None else argv)])
        write_results(args.out, "start_estimates_live", record, {
            "seeds": args.seeds, "jobs": args.jobs, "speedup": args.speedup, "every_s": args.every,
            "min_wait_s": args.min_wait, **results, "seconds": round(time.monotonic() - started)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
