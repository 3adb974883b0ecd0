"""The what-if's cluster engine and its agreement with the model, on a slice of the agreement bench: one stack
change (team-b's queue weight 1 -> 4), one out-of-sample trace seed, each side replayed on a throw-away cluster of
the stack's shape through the real vc-scheduler, JobSet and trainyard controllers."""

from __future__ import annotations

import json
import os

import pytest

from bench_modules import load_bench

pytestmark = pytest.mark.integration

PORT_BASE = os.environ.get("TRAINYARD_WHATIF_TEST_PORT_BASE", "28400")


def test_a_slice_of_the_whatif_agreement_runs_both_sides_on_clusters_and_scores_the_model(tmp_path):
    bench = load_bench("whatif_agreement")
    code = bench.main(["--seeds", "31", "--changes", "weight", "--jobs", "24", "--speedup", "8", "--no-spread",
                       "--port-base", PORT_BASE, "--work", str(tmp_path / "work"), "--out", str(tmp_path)])
    assert code == 0
    results = json.loads((tmp_path / "whatif_agreement.json").read_text())["results"]
    summary = results["summary"]
    assert (summary["changes"], summary["seeds"], summary["cases"]) == (1, 1, 1)
    (case,) = results["cases"]
    assert case["change"] == "weight" and case["unfinished"] == {"current": [], "proposed": []}, case
    rows = case["figures"]
    assert {"allocation", "goodput", "share.team-a", "share.team-b"} <= set(rows), rows
    # every side's replay was kept with what ran it: a cluster, 8x faster than the trace
    sides = [json.loads(path.read_text())["side"] for path in sorted((tmp_path / "work").glob("*.json"))]
    assert len(sides) == 2 and all(side["engine"]["name"] == "cluster" and side["engine"]["speedup"] == 8
                                   for side in sides)
    # ... with each started job's wait and nodes, and the model's side is the mean of its ensemble
    assert all(side["jobs"] and all(job["nodes"] for job in side["jobs"].values()) for side in sides)
    # ... and what vc-scheduler's log says of the queues it held back (read before the cluster went)
    assert all(set(counts) == {"overused_s", "refused_s"} for side in sides
               for counts in side["held_back"].values()), [side["held_back"] for side in sides]
    assert case["model_ensemble"]["members"] == 16, case["model_ensemble"]
    # both engines saw the cluster busy: allocation figures on both sides, within the bench's coarse bound of
    # each other (the bench's 3-point target is judged over full traces, not on this slice of 24 jobs)
    assert all(side["allocation"] is not None for side in sides)
    assert summary["max_allocation_error_points"] <= 15, rows
