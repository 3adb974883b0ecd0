"""Start estimates users were told, scored against when their jobs really started (pure; the
start_estimates_live bench observes the Events and the replay, this judges them)."""

from __future__ import annotations

from typing import Any, Mapping

from trainyard.schedtrace.replay import RunRecord
from trainyard.stats import percentile


def scored(record: RunRecord, told: Mapping[str, Mapping[str, dict]], min_wait_s: float) -> list[dict]:
    """Each job that waited at least `min_wait_s` and got an estimate Event: its wait, and every estimate it was told
    before it started (the first is what its user saw on submitting) with its error where it gave a time."""
    starts: dict[str, float] = {}
    for pod in record.pods.values():
        if pod.bound is not None:
            starts[pod.job] = min(starts.get(pod.job, pod.bound), pod.bound)
    out = []
    for name, submitted in sorted(record.submitted.items()):
        if name not in starts or starts[name] - submitted < min_wait_s or not told.get(name):
            continue
        started_epoch = record.started_epoch + starts[name]
        estimates = []
        for entry in sorted(told[name].values(), key=lambda e: e["estimated_epoch"] or e["seen_epoch"]):
            made = entry["estimated_epoch"] or entry["seen_epoch"]
            if made >= started_epoch:
                continue
            row = {"message": entry["message"], "given": entry["expected_epoch"] is not None,
                   "before_start_s": round(started_epoch - made, 1)}
            if row["given"]:
                error = abs(entry["expected_epoch"] - started_epoch)
                row.update(error_s=round(error, 1), error_share=round(error / max(started_epoch - made, 1.0), 3))
            estimates.append(row)
        if estimates:
            out.append({"job": name, "wait_s": round(starts[name] - submitted, 1), "first": estimates[0],
                        "estimates": estimates})
    return out


def figures(rows: list[dict]) -> dict[str, Any]:
    """Over the first estimate of each job (what its user saw first) and over every estimate written."""
    every = [estimate for row in rows for estimate in row["estimates"]]
    return {"jobs_scored": len(rows), **_errors([row["first"] for row in rows]),
            "every_estimate": {"estimates": len(every), **_errors(every)}}


def _errors(estimates: list[dict]) -> dict[str, Any]:
    given = [e for e in estimates if e["given"]]
    errors, shares = [e["error_s"] for e in given], [e["error_share"] for e in given]
    return {"given": len(given), "given_share": round(len(given) / len(estimates), 3) if estimates else None,
            "median_error_s": _round(percentile(errors, 50)), "p90_error_s": _round(percentile(errors, 90)),
            "median_error_share": _round(percentile(shares, 50), 3),
            "p90_error_share": _round(percentile(shares, 90), 3)}


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(float(value), digits)
