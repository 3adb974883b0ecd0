#!/usr/bin/env python3
"""How long `trainyard platform whatif` takes: each stack of stacks/ against itself, a generated trace of --jobs jobs
replayed on both sides (the command's whole work, stack reading included), with peak RSS. Prints a table and, with
--out DIR, writes DIR/whatif.json; asserts nothing. Target (issue: what-if): 2,000 jobs in at most 60 s on 2 cores.

Usage: .venv/bin/python bench/whatif.py [--jobs 2000] [--seed 0] [--stacks local,dev,prod] [--out DIR]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

from trainyard.benchkit import run_record, write_results
from trainyard.paths import repo_root
from trainyard.whatif.run import what_if_files


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stacks", default="local,dev,prod")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    root = repo_root()
    rows = []
    for stack in args.stacks.split(","):
        path = root / "stacks" / f"Pulumi.{stack}.yaml"
        started = time.monotonic()
        found = what_if_files(path, root, path, seed=args.seed, jobs=args.jobs)
        seconds = time.monotonic() - started
        side = found.result["current"]
        rows.append({"stack": stack, "jobs": args.jobs, "seconds": round(seconds, 2),
                     "allocation": side["allocation"], "saturated_s": side["saturated_s"]})
        print(f"{stack:6} {args.jobs} jobs, both sides: {seconds:6.1f} s  (allocation {side['allocation']}, "
              f"saturated {side['saturated_s']:.0f} s of simulated time)", flush=True)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak_mib:.0f} MiB")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        record = run_record(["bench/whatif.py", *(sys.argv[1:] if argv is None else argv)])
        write_results(args.out, "whatif", record, {"jobs": args.jobs, "seed": args.seed, "peak_rss_mib": round(peak_mib),
                                                    "stacks": {row.pop("stack"): row for row in rows}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
