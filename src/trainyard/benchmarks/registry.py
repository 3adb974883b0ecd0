"""The declared benchmarks: one entry per script in bench/, with the figures read from each run's JSON.

A script run by the runner takes `--out DIR` and writes `DIR/<output>` holding a `results` object; every figure is
a dotted path into that object. The runner adds the provenance and the median and spread over the repeats.
"""

from __future__ import annotations

from trainyard.benchmarks.declarations import ZERO, Bench, Figure, Target
from trainyard.benchmarks.prediction_benches import CALIBRATION, ESTIMATES, ESTIMATES_LIVE
from trainyard.benchmarks.day2_benches import NODE_LOSS_TRACE
from trainyard.benchmarks.reclaim_benches import GOODPUT

BENCHES: tuple[Bench, ...] = (
    Bench(
        name="bad_input",
        script="bench/bad_input.py",
        measures="Generated broken TrainJob/runtime pairs and stack configs through admission, the CLI checks and "
                 "the build: every one must be admitted or refused with a message a user can act on.",
        args=("--pairs", "10000", "--stacks", "2000"),
        quick_args=("--pairs", "300", "--stacks", "100"),
        repeat_args=("--seed", "{repeat}"),
        minutes=2.0,
        figures=(
            Figure("pairs", "pairs.generated", "TrainJob/runtime pairs per run", digits=0),
            Figure("pairs_unexpected", "pairs.unexpected_exceptions", "pairs: unexpected exceptions", digits=0,
                   target=ZERO),
            Figure("pairs_unclear", "pairs.unclear_messages", "pairs: refusals without a field and a fix", digits=0,
                   target=ZERO),
            Figure("stacks", "stacks.generated", "stack configs per run", digits=0),
            Figure("stacks_unexpected", "stacks.unexpected_exceptions", "stacks: unexpected exceptions", digits=0,
                   target=ZERO),
            Figure("stacks_unclear", "stacks.unclear_messages", "stacks: refusals without a field and a fix",
                   digits=0, target=ZERO),
            Figure("seconds", "seconds", "wall time of a run", unit="s", digits=0),
        ),
    ),
    Bench(
        name="bad_files",
        script="bench/bad_files.py",
        measures="Hostile files (alias bombs, huge counts, bad bytes, typos) through the real CLI under 1 GiB and a "
                 "time limit: each must be refused clearly, never a traceback, an out-of-memory or a timeout.",
        quick_args=("--class", "alias bomb", "--class", "duplicate key"),
        minutes=0.5,
        figures=(
            Figure("cases", "cases", "cases", digits=0),
            Figure("refused_clearly", "outcomes.refused clearly", "refused clearly", digits=0),
            Figure("not_refused_clearly", "not_refused_clearly", "anything else (accepted, traceback, OOM, timeout)",
                   digits=0, target=ZERO),
            Figure("seconds", "seconds", "wall time of a run", unit="s", digits=0),
        ),
    ),
    Bench(
        name="whatif",
        script="bench/whatif.py",
        measures="How long `trainyard platform whatif` takes: each stack of stacks/ against itself, a generated "
                 "trace replayed on both sides (stack reading included), and its peak memory.",
        args=("--jobs", "2000"),
        quick_args=("--jobs", "300"),
        repeat_args=("--seed", "{repeat}"),
        minutes=0.5,
        figures=(
            Figure("local_seconds", "stacks.local.seconds", "local stack, 2,000 jobs, both sides", unit="s",
                   target=Target("<=", 60)),
            Figure("dev_seconds", "stacks.dev.seconds", "dev stack, 2,000 jobs, both sides", unit="s",
                   target=Target("<=", 60)),
            Figure("prod_seconds", "stacks.prod.seconds", "prod stack (64 nodes), 2,000 jobs, both sides", unit="s",
                   target=Target("<=", 60)),
            Figure("peak_rss_mib", "peak_rss_mib", "peak resident memory", unit="MiB", digits=0),
        ),
    ),
    Bench(
        name="whatif_agreement",
        script="bench/whatif_agreement.py",
        measures="The what-if's model against its cluster engine (`--engine cluster`): eight kinds of stack change on "
                 "trace seeds no calibration used, the change the model predicts beside the change the real "
                 "vc-scheduler, JobSet and trainyard controllers produce.",
        args=("--seeds", "31,32,33", "--jobs", "24", "--speedup", "4", "--base-replays", "4",
              "--work", "bench/out/whatif_agreement"),
        repeats=1,
        long=True,
        minutes=240.0,
        notes=("One run over all seeds (the summary is over every case); each side's cluster replay is kept in "
               "bench/out/whatif_agreement, so an interrupted run resumes.",),
        figures=(
            Figure("changes", "summary.changes", "distinct kinds of stack change", digits=0, target=Target(">=", 8)),
            Figure("seeds", "summary.seeds", "trace seeds, none used for calibration", digits=0,
                   target=Target(">=", 3)),
            Figure("sign_agreement", "summary.sign_agreement",
                   "the model's sign of change agrees where the cluster's change exceeds its spread", unit="%",
                   scale=100, target=Target(">=", 1.0)),
            Figure("sign_agreement_modelled", "summary.sign_agreement_modelled",
                   "the same, over the changes the model replays (not those it says it leaves out)", unit="%",
                   scale=100),
            Figure("max_allocation_error", "summary.max_allocation_error_points", "largest allocation error",
                   unit="points", target=Target("<=", 3)),
            Figure("max_share_error", "summary.max_share_error_points", "largest tenant share error", unit="points",
                   target=Target("<=", 3)),
            Figure("max_allocation_error_modelled", "summary.max_allocation_error_points_modelled",
                   "largest allocation error, changes the model replays", unit="points"),
            Figure("max_share_error_modelled", "summary.max_share_error_points_modelled",
                   "largest tenant share error, changes the model replays", unit="points"),
            Figure("max_wait_p50_error", "summary.max_wait_p50_error_s", "largest p50 wait error (by job size)",
                   unit="s", digits=0),
            Figure("within_model_spread", "summary.within_model_spread",
                   "allocation and share changes within the model's mean +- 2 sd of its ensemble", unit="%",
                   scale=100, digits=0),
        ),
    ),
)



def _per_tenant(profile: str) -> tuple[Figure, ...]:
    """Each queue's share minus its weighted fair share; the scheduling issue's bar is 5 points either way."""
    return tuple(Figure(f"{tenant.replace('-', '_')}_deviation", f"{profile}.queues.{tenant}.deviation_points",
                        f"{tenant}: share minus fair share while saturated", unit="points",
                        target=Target("|x|<=", 5))
                 for tenant in ("team-a", "team-b", "team-c"))


SETUP = Bench(
    name="fresh_clone",
    script="bench/fresh_clone.py",
    measures="The README's commands on a fresh clone with the toolchain already built: `make up` (a new venv from "
             "PyPI, the local cluster, `pulumi up` of the local stack), the example TrainJob as a tenant user until "
             "Complete, `trainyard fit`, `report` and `usage`, `make down`.",
    minutes=4.0,
    figures=(
        Figure("make_up_seconds", "make_up_seconds", "`make up` (warm toolchain, new venv)", unit="s", digits=0),
        Figure("example_complete_seconds", "example_complete_seconds", "example TrainJob created to Complete",
               unit="s", target=Target("<=", 60)),
        Figure("fit_seconds", "fit_seconds", "`trainyard fit` of the example", unit="s", target=Target("<=", 5)),
        Figure("report_seconds", "report_seconds", "`trainyard report`", unit="s", target=Target("<=", 5)),
        Figure("usage_seconds", "usage_seconds", "`trainyard usage --since 1h`", unit="s", target=Target("<=", 5)),
        Figure("make_down_seconds", "make_down_seconds", "`make down`", unit="s"),
    ),
)

LONG_BENCHES: tuple[Bench, ...] = (
    Bench(
        name="suite",
        script="bench/suite.py",
        measures="`make test` as CI runs it (`bash .ci/run` on a fresh clone, new venv, warm toolchain and images).",
        repeats=1,
        long=True,
        minutes=45.0,
        notes=("One run: the suite takes over 15 minutes.",),
        figures=(
            Figure("wall_seconds", "seconds", "wall time, clone to the last test", unit="s", digits=0),
            Figure("passed", "passed", "tests passed", digits=0),
            Figure("failed", "exit_code", "exit code", digits=0, target=ZERO),
        ),
    ),
    Bench(
        name="scheduling_trace",
        script="bench/scheduling_trace.py",
        measures="One seeded trace per run (150 jobs of three tenants at 1.5x a 64-node x 8-GPU cluster) through "
                 "the real path (TrainJob, trainyard's controller, JobSet, PodGroup, vc-scheduler) with the shipped "
                 "`gang` profile; each run a different trace.",
        args=("--profiles", "gang"),
        repeat_args=("--seed", "{seed}"),
        seeds=(12, 13, 14),
        long=True,
        minutes=15.0,
        figures=(
            Figure("allocation", "gang.allocation_while_saturated", "GPU allocation while saturated", unit="%",
                   scale=100.0),
            Figure("goodput", "gang.goodput_while_saturated", "goodput while saturated (work kept)", unit="%", scale=100.0),
            Figure("evicted_share", "gang.evicted_share", "GPU-seconds held by pods evicted (work lost)", unit="%", scale=100.0),
            Figure("partial_gangs", "gang.partial_gangs#", "partial gangs", digits=0, target=ZERO),
            Figure("beyond_tier", "gang.topology.beyond_allowed_tier#", "gangs beyond their hard topology tier",
                   digits=0, target=ZERO),
            *_per_tenant("gang"),
        ),
    ),
    Bench(
        name="fit_agreement",
        script="bench/fit_agreement.py",
        measures="Generated TrainJobs asked to `trainyard fit`, then created on a 4-node cluster (idle or loaded): "
                 "fits must be placed, waits placed once room is made, refused refused at create or never placed "
                 "within the stated window.",
        args=("--count", "100"),
        repeat_args=("--seed", "{seed}"),
        seeds=(7, 8, 9),
        long=True,
        minutes=15.0,
        figures=(
            Figure("agreement", "agreement", "verdicts that then happened", unit="%", scale=100.0, target=Target(">=", 0.99)),
            Figure("disagreements", "disagreements#", "disagreements", digits=0),
            Figure("cases", "cases", "TrainJobs per run", digits=0),
            Figure("window", "start_window_seconds", "window a waiting job is given once room is made", unit="s",
                   digits=0),
        ),
    ),
    Bench(
        name="fairness_agreement",
        script="bench/fairness_agreement.py",
        measures="The fairness audit read from Prometheus (`trainyard report --since`) beside the scheduling "
                 "trace's own pod records, on one replay with the usage record on.",
        repeat_args=("--seed", "{seed}"),
        seeds=(12, 13, 14),
        long=True,
        minutes=15.0,
        figures=(
            Figure("worst_difference", "worst_relative_difference", "worst relative difference of a figure",
                   unit="%", scale=100.0, digits=2, target=Target("<=", 0.02)),
            Figure("jain_index", "jain_index", "Jain's fairness index", digits=3),
        ),
    ),
    Bench(
        name="side_by_side",
        script="bench/side_by_side.py",
        measures="trainyard's TrainJob controller beside Kubeflow Trainer's own (v2.3.0, built from its module) on "
                 "one cluster: 1,000 suspended TrainJobs drained, then 200 streamed at 20/s, at the shipped client "
                 "limits.",
        args=("--limits", "shipped"),
        long=True,
        minutes=20.0,
        figures=tuple(
            Figure(f"{who}_{key}", f"by_run.{who}-shipped.{path}", f"{who}: {label}", unit=unit, digits=digits)
            for who in ("trainyard", "upstream")
            for key, path, label, unit, digits in (
                ("drain_per_second", "trainjobs_per_second", "TrainJobs drained per second", "/s", 1),
                ("stream_p99_ms", "stream_p99_ms", "stream latency p99", "ms", 0),
                ("cpu_per_trainjob", "cpu_seconds_per_trainjob", "CPU seconds per TrainJob", "s", 4),
                ("peak_rss_mib", "peak_rss_mib", "peak resident memory", "MiB", 0),
                ("writes_per_trainjob", "writes_per_trainjob", "API writes per TrainJob", "", 1))),
    ),
    Bench(
        name="scale",
        script="bench/scale.py",
        measures="1,000 simulated nodes x 8 GPUs, 100 generated tenants: `pulumi up`, previews and a one-tenant "
                 "change; then 10,000 TrainJobs of an hour's trace, with the load really delivered stated.",
        repeats=1,
        long=True,
        minutes=90.0,
        notes=("One run: a run takes over an hour on the reference machine.",),
        figures=(
            Figure("noop_preview_seconds", "pulumi.noop_preview_seconds", "pulumi preview, no change", unit="s",
                   target=Target("<=", 60)),
            Figure("one_tenant_apply_seconds", "pulumi.one_tenant_apply_seconds", "one-tenant change applied",
                   unit="s", target=Target("<=", 60)),
            Figure("offered_load_delivered", "controller.offered_load_delivered",
                   "offered load delivered (of the cluster)", digits=2),
            Figure("creates_per_second", "controller.creates_per_second", "TrainJobs created per second", digits=1),
            Figure("lag_p99_seconds", "controller.lag_p99_seconds", "create to JobSet + PodGroup, p99", unit="s"),
            Figure("controller_peak_rss_mib", "controller.controller_peak_rss_mib", "controller peak memory",
                   unit="MiB", digits=0, target=Target("<=", 1024)),
            Figure("report_seconds", "controller.report_seconds", "`trainyard report` with every TrainJob in place",
                   unit="s", target=Target("<=", 5)),
            Figure("fit_seconds", "controller.fit_seconds", "`trainyard fit` with every TrainJob in place", unit="s",
                   target=Target("<=", 5)),
        ),
    ),
)

BENCHES = BENCHES + (SETUP,) + LONG_BENCHES + (ESTIMATES, ESTIMATES_LIVE, CALIBRATION, GOODPUT, NODE_LOSS_TRACE)

BY_NAME = {bench.name: bench for bench in BENCHES}


def bench_named(name: str) -> Bench:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no bench {name!r}; the benches are {', '.join(BY_NAME)}") from None
