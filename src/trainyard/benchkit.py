"""What the benchmarks in bench/ measure the same way: a process's CPU and memory from /proc, Prometheus
text (counters summed over labels, histogram buckets), and when each TrainJob had both its JobSet and its
PodGroup (a watch on both kinds).

The parsing is pure and unit-tested; the samplers and the watch are the thin I/O around it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from prometheus_client.parser import text_string_to_metric_families

from trainyard import k8s as K

CLOCK_TICKS = 100.0
"""USER_HZ: /proc/<pid>/stat counts CPU time in these (100 on every Linux the toolchain targets)."""


@dataclass(frozen=True)
class ProcessUsage:
    cpu_s: float
    """User + system CPU seconds so far, all threads."""
    peak_rss_mib: float
    rss_mib: float


def parse_process_usage(stat: str, status: str) -> ProcessUsage:
    """From the text of /proc/<pid>/stat and /proc/<pid>/status (the command name may hold spaces or ')')."""
    fields = stat.rsplit(")", 1)[1].split()
    values = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return ProcessUsage(cpu_s=(int(fields[11]) + int(fields[12])) / CLOCK_TICKS,
                        peak_rss_mib=int(values["VmHWM"].split()[0]) / 1024,
                        rss_mib=int(values["VmRSS"].split()[0]) / 1024)


def process_usage(pid: int) -> ProcessUsage:
    """CPU seconds, peak and current resident memory of a live process."""
    proc = Path(f"/proc/{pid}")
    return parse_process_usage((proc / "stat").read_text(), (proc / "status").read_text())


class RssTrace:
    """A process's resident memory (MiB) every `every` seconds, as (seconds since `started`, MiB)."""

    def __init__(self, pid: int, started: float, every: float = 0.5):
        self.points: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, args=(pid, started, every), daemon=True)
        self.thread.start()

    def _sample(self, pid: int, started: float, every: float) -> None:
        while not self.stop.wait(every):
            try:
                rss = process_usage(pid).rss_mib
            except (OSError, KeyError, IndexError):  # the process ended
                return
            self.points.append((round(time.monotonic() - started, 1), round(rss, 1)))

    def finish(self) -> list[tuple[float, float]]:
        self.stop.set()
        self.thread.join()
        return self.points


def samples(text: str, name: str) -> Iterable[tuple[str, dict[str, str], float]]:
    """(sample name, labels, value) of metric family `name` (counters: `name` without `_total`)."""
    family_name = name.removesuffix("_total")
    for family in text_string_to_metric_families(text):
        if family.name == family_name:
            for sample in family.samples:
                yield sample.name, sample.labels, sample.value


def counter_sum(text: str, name: str, **match: str) -> float:
    """Counter `name` (e.g. apiserver_request_total) summed over every label set that has the `match` labels."""
    total_name = name if name.endswith("_total") else f"{name}_total"
    return sum(value for sample, labels, value in samples(text, name)
               if sample == total_name and all(labels.get(k) == v for k, v in match.items()))


def histogram_buckets(text: str, name: str) -> dict[float, float]:
    """Cumulative bucket counts of histogram `name` by upper bound, summed over its other labels."""
    buckets: dict[float, float] = {}
    for sample, labels, value in samples(text, name):
        if sample == f"{name}_bucket":
            bound = float(labels["le"])
            buckets[bound] = buckets.get(bound, 0.0) + value
    return buckets


class ChildrenWatch:
    """Watches JobSets and PodGroups (one namespace, or all with `namespace=None`): `both[(namespace, name)]` is
    the monotonic time when a TrainJob of that name had both, i.e. when the controller had built it."""

    KINDS = ((K.JOBSET_GROUP, K.JOBSET_VERSION, K.JOBSETS), (K.VOLCANO_GROUP, K.VOLCANO_VERSION, K.PODGROUPS))

    def __init__(self, new_custom_api, namespace: str | None = None):
        """`new_custom_api()` returns a kubernetes CustomObjectsApi; each watch thread gets its own client."""
        self.new_custom_api, self.namespace = new_custom_api, namespace
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.seen: dict[tuple[str, str], set[str]] = {}
        self.both: dict[tuple[str, str], float] = {}
        self.threads = [threading.Thread(target=self._follow, args=kind, daemon=True) for kind in self.KINDS]

    def start(self) -> "ChildrenWatch":
        for thread in self.threads:
            thread.start()
        return self

    def _follow(self, group: str, version: str, plural: str) -> None:
        from kubernetes import watch

        custom = self.new_custom_api()
        args: tuple[str, ...] = (group, version, plural) if self.namespace is None else (
            group, version, self.namespace, plural)
        lister = custom.list_cluster_custom_object if self.namespace is None else custom.list_namespaced_custom_object
        version_seen = ""
        while not self.stop.is_set():
            try:
                for event in watch.Watch().stream(lister, *args, timeout_seconds=30,
                                                  resource_version=version_seen or None):
                    metadata = event["object"]["metadata"]
                    version_seen = metadata.get("resourceVersion", version_seen)
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.saw(plural, (metadata["namespace"], metadata["name"]))
                    if self.stop.is_set():
                        return
            except Exception:  # noqa: BLE001 - a dropped or expired watch (or namespace deleted): list and watch again
                version_seen = ""
                time.sleep(0.5)

    def saw(self, plural: str, key: tuple[str, str], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self.lock:
            kinds = self.seen.setdefault(key, set())
            kinds.add(plural)
            if len(kinds) == len(self.KINDS) and key not in self.both:
                self.both[key] = now

    def count(self, keys: Iterable[tuple[str, str]]) -> int:
        with self.lock:
            return sum(1 for key in keys if key in self.both)


RESULTS_DIR = "bench/results"
"""Where `trainyard bench run` writes each bench's results file (relative to the repository)."""


def run_record(argv: list[str]) -> dict:
    """What every results file says about its run: the command line, the commit (with `+dirty` when the tree has
    uncommitted changes: other results files, written by the benches run before in the same `bench run`, do not
    count), the UTC time and the machine (cores, 1-minute load average when it began)."""
    import datetime as dt
    import os
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "-uno", "--", ".", f":(exclude){RESULTS_DIR}")
    return {"command": " ".join(argv), "commit": commit + ("+dirty" if dirty else ""),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": {"cores": os.cpu_count(), "load_average_1m_before": round(os.getloadavg()[0], 2)}}


def finish_record(record: dict) -> dict:
    """`record` with the load average at the end of the run."""
    import os

    record["machine"]["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    return record


def write_results(out_dir: Path, name: str, record: dict, results: dict) -> Path:
    """`out_dir/<name>.json`: the run's provenance (`run_record`, finished now) with its `results`, the file
    `trainyard bench run` reads back."""
    import json

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps({**finish_record(record), "results": results}, indent=1) + "\n")
    return path
