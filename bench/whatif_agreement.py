#!/usr/bin/env python3
"""The what-if's model against its cluster engine, out of sample: eight kinds of stack change
(`trainyard.whatif.agreement.CHANGES`) on generated traces whose seeds no calibration used; per case the change
the model predicts beside the change the real vc-scheduler, JobSet and trainyard controllers produce on a
throw-away cluster of the stack's shape. Prints a table per case and the summary; asserts nothing.

The run-to-run spread is measured per seed by replaying the base stack --base-replays times on the cluster (the
widest pair per figure); a figure's spread is the largest any seed showed (for a wait, at least one scheduling cycle
in trace seconds), and a sign is scored only where the cluster's change exceeds it. Every side's cluster replay is kept in --work (a rerun reuses them).

Usage: .venv/bin/python bench/whatif_agreement.py [--seeds 31,32,33] [--changes weight,capability,...]
       [--jobs 24] [--speedup 4] [--base-replays 4] [--no-spread] [--port-base 28200] [--work DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from trainyard.benchkit import run_record, write_results
from trainyard.paths import repo_root
from trainyard.platform.stack_source import read_stack_source
from trainyard.schedtrace.summary import SCHEDULE_CYCLE_S
from trainyard.whatif import agreement as A
from trainyard.whatif.compare import compare
from trainyard.whatif.scenario import at_speedup, scenario
from trainyard.whatif.stacks import load
from trainyard.whatif.workload import generated, tenants_of, trace_document

MODEL_NOTE = ("each side on the model is the mean of an ensemble of replays (trainyard.whatif.ensemble), its "
              "wall-clock latencies and loops multiplied by the speedup as the compressed cluster replay runs them "
              "(trainyard.whatif.scenario.at_speedup)")

CALIBRATION_SEEDS = (12, 13, 14, 7, 8, 9)
"""Seeds the model's constants or earlier agreement benches used: never an out-of-sample seed here."""


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="31,32,33")
    parser.add_argument("--changes", default=",".join(c.name for c in A.CHANGES))
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--speedup", type=float, default=4.0)
    parser.add_argument("--base-replays", type=int, default=4,
                        help="cluster replays of the base per seed that measure the run-to-run spread (at least 2)")
    parser.add_argument("--no-spread", action="store_true", help="replay the base once (spread 0)")
    parser.add_argument("--port-base", type=int, default=28200)
    parser.add_argument("--work", type=Path, default=Path("bench/out/whatif_agreement"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",")]
    used = sorted(set(args.seeds) & set(CALIBRATION_SEEDS))
    if used:
        parser.error(f"--seeds {used}: used for calibration; pick seeds outside {CALIBRATION_SEEDS}")
    known = {c.name: c for c in A.CHANGES}
    unknown = [name for name in args.changes.split(",") if name not in known]
    if unknown:
        parser.error(f"--changes {unknown}: use {', '.join(known)}")
    args.changes = [known[name] for name in args.changes.split(",")]
    if args.base_replays < 2:
        parser.error(f"--base-replays {args.base_replays}: the spread needs at least 2 (or --no-spread)")
    return args


def stack(document: dict, directory: Path, name: str):
    path = directory / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load(read_stack_source(path))


def on_cluster(args, config, document: dict, trace: list, key: str) -> dict:
    """One side on the cluster engine, or its kept replay from --work (same stack document, trace and speed)."""
    from trainyard.whatif.cluster_engine import replay_on_cluster

    path = args.work / f"{key}.json"
    identity = {"trace": trace_document(trace), "speedup": args.speedup, "stack": document}
    if path.exists():
        kept = json.loads(path.read_text())
        if kept.get("identity") == identity:
            print(f"  {key}: kept replay", flush=True)
            return kept["side"]
    print(f"  {key}: cluster replay", flush=True)
    side = replay_on_cluster(config, scenario(config), trace, speedup=args.speedup, port_base=args.port_base,
                             echo=lambda line: print(line, flush=True))
    args.work.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"identity": identity, "side": side}))
    return side


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    local = yaml.safe_load((repo_root() / "stacks" / "Pulumi.local.yaml").read_text())
    replayed, spreads = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        base_doc = A.base(local)
        base = stack(base_doc, directory, "base")
        documents = {c.name: A.proposed(base_doc, c) for c in args.changes}
        proposals = {name: stack(document, directory, name) for name, document in documents.items()}
        for seed in args.seeds:
            names = tenants_of({t.name: t for t in base.tenants})
            base_trace = A.with_high_priority(generated(scenario(base), names, seed, args.jobs))
            print(f"seed {seed}: {len(base_trace)} jobs", flush=True)
            current = on_cluster(args, base, base_doc, base_trace, f"s{seed}-base")
            if not args.no_spread:
                again = [on_cluster(args, base, base_doc, base_trace, f"s{seed}-base-again" + (f"{i}" if i else ""))
                         for i in range(args.base_replays - 1)]
                spreads[seed] = {key: round(value, 2) for key, value in A.spread_of_replays([current, *again]).items()}
            for change in args.changes:
                trace = A.workload(change, base_trace)
                now = current if trace == base_trace else on_cluster(args, base, base_doc, trace,
                                                                     f"s{seed}-base-{change.name}")
                config = proposals[change.name]
                model = compare(at_speedup(scenario(base), args.speedup), at_speedup(scenario(config), args.speedup),
                                trace, seed)
                cluster = {"current": now, "proposed": on_cluster(args, config, documents[change.name], trace,
                                                                  f"s{seed}-{change.name}")}
                replayed.append((change, seed, model, cluster))
    noise = A.pooled_spread(list(spreads.values()))
    wait_floor_s = SCHEDULE_CYCLE_S * args.speedup
    cases = []
    for change, seed, model, cluster in replayed:
        found = A.case(change, seed, model, cluster, noise, wait_floor_s)
        found["model_ensemble"] = model["current"].get("ensemble")
        found["unfinished"] = {side: cluster[side].get("unfinished", []) for side in cluster}
        found["held_back"] = {engine: {side: sides[side].get("held_back") for side in sides}
                              for engine, sides in (("model", model), ("cluster", cluster))}
        cases.append(found)
        print_case(found)
    headline = A.summary(cases)
    print(json.dumps(headline, indent=1))
    if args.out:
        record = run_record(["bench/whatif_agreement.py", *(sys.argv[1:] if argv is None else argv)])
        write_results(args.out, "whatif_agreement", record, {
            "summary": headline, "seeds": args.seeds, "jobs": args.jobs, "speedup": args.speedup,
            "spread_measured": not args.no_spread, "base_replays": 1 if args.no_spread else args.base_replays,
            "spreads": spreads, "pooled_spread": noise,
            "wait_floor_s": wait_floor_s, "model": MODEL_NOTE, "cases": cases,
            "seconds": round(time.monotonic() - started)})
    return 0


def print_case(found: dict) -> None:
    print(f"{found['change']} (seed {found['seed']}): {found['describe']}")
    for key, row in found["figures"].items():
        sign = "-" if row["sign_agrees"] is None else ("agrees" if row["sign_agrees"] else "DISAGREES")
        print(f"  {key:22} model {row['model']:+8.1f}  cluster {row['cluster']:+8.1f}  error {row['error']:6.1f}  "
              f"spread {row['spread']:5.1f}  sign {sign}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
