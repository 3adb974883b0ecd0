#!/usr/bin/env python3
"""The platform at scale: a local cluster of 1,000 simulated nodes x 8 GPUs (125 racks under 16 spines) and a
stack of 100 generated tenants (`trainyard.scale_stack`); prints figures, asserts nothing.

Phase `pulumi` (issue 21, part 2; targets in brackets):
- `pulumi up` of the 100-tenant stack onto the fresh cluster, and the number of resources it manages;
- `pulumi preview` with no change [<= 60 s], checked to be empty (`--expect-no-changes`);
- a one-tenant change (a queue weight): its preview, then its apply as `trainyard platform up` runs it (`pulumi
  up`, then the refresh of the adoptable objects it touched) [<= 60 s]; then a preview checked to be empty.

The controller phase (10,000 TrainJobs over a simulated hour: drain rate, RSS and CPU, Volcano's scheduling
cycle p99, `report`/`fit` latency, API requests per TrainJob) is not written yet.

Results: `--out DIR`/scale.json and a table on stdout; Pulumi's own output goes to `--out DIR`/scale-pulumi.log.

Usage: .venv/bin/python bench/scale.py [--nodes 1000] [--racks 125] [--spines 16] [--tenants 100] [--out bench/out]
       [--keep]
It starts its own cluster (name trainyard-scale, ports from 29800) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from trainyard import stack_deploy
from trainyard.cluster import local
from trainyard.cluster.spec import ClusterSpec
from trainyard.scale_stack import scale_stack_document, with_tenant_weight
from trainyard.timestamps import utc_now
from trainyard.toolchain.build import ensure_built

STACK = "scale"


def timed(label: str, action) -> float:
    print(f"# {label} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    action()
    seconds = time.monotonic() - started
    print(f"# {label}: {seconds:.1f} s", file=sys.stderr, flush=True)
    return round(seconds, 1)


def pulumi_phase(spec: ClusterSpec, tenants: int, log: Path) -> dict:
    """The 100-tenant stack's Pulumi passes, each as `trainyard platform preview/up` runs it (`--parallel`, and
    after `up` the refresh of adoptable objects it touched)."""
    document = scale_stack_document(stack_deploy.read_stack_file("local"), spec, tenants)
    target = stack_deploy.local_target(STACK, document, spec.name)
    figures: dict = {"tenants": tenants, "parallel": stack_deploy.PULUMI_PARALLEL}
    figures["up_seconds"] = timed(f"pulumi up of {tenants} tenants", lambda: apply(target, log))
    figures["resources"] = len(stack_deploy.stack_resources(target))
    figures["noop_preview_seconds"] = timed(
        "pulumi preview, no change", lambda: stack_deploy.run_target(target, "preview", ("--expect-no-changes",), log=log))
    changed = stack_deploy.local_target(STACK, with_tenant_weight(document, 0, 9), spec.name)
    figures["one_tenant_preview_seconds"] = timed(
        "pulumi preview of a one-tenant change", lambda: stack_deploy.run_target(changed, "preview", log=log))
    figures["one_tenant_apply_seconds"] = timed("applying it (trainyard platform up)", lambda: apply(changed, log))
    figures["one_tenant_end_to_end_seconds"] = round(figures["one_tenant_preview_seconds"]
                                                     + figures["one_tenant_apply_seconds"], 1)
    figures["after_change_noop_preview_seconds"] = timed(
        "pulumi preview after it, no change",
        lambda: stack_deploy.run_target(changed, "preview", ("--expect-no-changes",), log=log))
    return figures


def apply(target: stack_deploy.StackTarget, log: Path) -> None:
    """What `trainyard platform up` does: `pulumi up`, then the refresh of the adoptable objects it touched."""
    started = utc_now()
    stack_deploy.run_target(target, "up", log=log)
    stack_deploy.refresh_adopted(target, started, log=log)


def table(figures: dict) -> str:
    p = figures["pulumi"]
    rows = [("what", "seconds", "target"),
            (f"pulumi up, {p['tenants']} tenants ({p['resources']} resources)", p["up_seconds"], "-"),
            ("pulumi preview, no change", p["noop_preview_seconds"], "<= 60"),
            ("one-tenant change: preview", p["one_tenant_preview_seconds"], "-"),
            ("one-tenant change: apply (trainyard platform up)", p["one_tenant_apply_seconds"], "<= 60"),
            ("one-tenant change: preview + apply", p["one_tenant_end_to_end_seconds"], "-"),
            ("pulumi preview after it, no change", p["after_change_noop_preview_seconds"], "<= 60")]
    widths = [max(len(str(row[i])) for row in rows) for i in range(3)]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(row, widths)) for row in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--racks", type=int, default=125)
    parser.add_argument("--spines", type=int, default=16)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    args = parser.parse_args()
    spec = ClusterSpec(name="trainyard-scale", port_base=29800, nodes=args.nodes, racks=args.racks, spines=args.spines,
                       timed_pods=True, feature_gates="TrainJobStatus=false")
    ensure_built(*local.REQUIRED_TOOLS, "pulumi", "pulumi-kubernetes", "pulumi-policy-analyzer")
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "scale-pulumi.log"
    log.write_text("")
    if local.is_running(spec.name):
        local.down(spec.name, echo=lambda *_: None)
    # `pulumi stack init scale` writes the new stack's settings file into stacks/ (the project's stackConfigDir):
    # the bench's stack is generated, not reviewed, so that file goes when the bench ends
    settings = stack_deploy.stack_file(STACK)
    settings_existed = settings.exists()
    figures: dict = {"nodes": spec.nodes, "gpus": spec.nodes * spec.gpus_per_node, "racks": spec.racks,
                     "spines": spec.spines}
    try:
        figures["cluster_up_seconds"] = timed(
            f"cluster up with {spec.nodes} nodes",
            lambda: local.up(spec, echo=lambda msg: print(f"# {msg}", file=sys.stderr)))
        figures["pulumi"] = pulumi_phase(spec, args.tenants, log)
    finally:
        if not args.keep:
            local.down(spec.name, echo=lambda *_: None)
        if not settings_existed:
            settings.unlink(missing_ok=True)
    (args.out / "scale.json").write_text(json.dumps(figures, indent=2))
    print(f"cluster up with {spec.nodes} nodes: {figures['cluster_up_seconds']} s")
    print(table(figures))
    print(f"figures: {args.out / 'scale.json'}; Pulumi's output: {log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
