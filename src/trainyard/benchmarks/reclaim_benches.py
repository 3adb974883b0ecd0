"""The benchmark of checkpoint-aware reclaim: goodput on the scheduling trace with checkpointing jobs."""

from __future__ import annotations

from trainyard.benchmarks.declarations import ZERO, Bench, Figure, Target

GOODPUT = Bench(
    name="goodput",
    script="bench/goodput.py",
    measures="Checkpoint-aware reclaim on trainyard's model of the scheduler: the scheduling trace's cluster and job "
             "mix, each job saving a checkpoint every 30, 60 or 120 s of work (a quarter none), on three trace seeds; "
             "the shipped reclaim profile asking victims to save first, beside no reclaim and reclaim without asking.",
    args=("--seeds", "51,52,53"),
    repeats=1,
    minutes=1.0,
    notes=("One run over the three seeds (the model is deterministic for a seed): the worst seed is the figure, every "
           "seed's figures are in the file.",),
    figures=(
        Figure("goodput", "summary.goodput", "goodput while saturated, worst seed (reclaim asking first)", unit="%",
               scale=100.0, target=Target(">=", 0.95)),
        Figure("deviation", "summary.max_share_deviation_points", "largest queue deviation from its fair share",
               unit="points", digits=1, target=Target("<=", 3)),
        Figure("lost_share", "summary.lost_share", "work lost, share of GPU-seconds held (worst seed)", unit="%",
               scale=100.0, digits=2, target=Target("<=", 0.01)),
        Figure("partial_gangs", "summary.partial_gangs", "partial gangs", digits=0, target=ZERO),
        Figure("beyond_tier", "summary.beyond_tier", "gangs beyond their hard topology tier", digits=0, target=ZERO),
        Figure("allocation_ask", "profiles.reclaim-ask.allocation.mean", "allocation, reclaim asking first (mean)",
               unit="%", scale=100.0),
        Figure("goodput_ask_mean", "profiles.reclaim-ask.goodput.mean", "goodput, reclaim asking first (mean)",
               unit="%", scale=100.0),
        Figure("goodput_reclaim", "profiles.reclaim.goodput.mean", "goodput, reclaim without asking (mean)", unit="%",
               scale=100.0),
        Figure("lost_ask_mean", "profiles.reclaim-ask.lost_share.mean", "work lost, reclaim asking first (mean)",
               unit="%", scale=100.0, digits=2),
        Figure("lost_reclaim", "profiles.reclaim.lost_share.mean", "work lost, reclaim without asking (mean)", unit="%",
               scale=100.0, digits=2),
        Figure("deviation_reclaim", "profiles.reclaim.max_share_deviation_points.max",
               "largest queue deviation, reclaim without asking (worst seed)", unit="points", digits=1),
        Figure("goodput_gang", "profiles.gang.goodput.mean", "goodput, no reclaim (mean)", unit="%", scale=100.0),
        Figure("deviation_gang", "profiles.gang.max_share_deviation_points.max",
               "largest queue deviation, no reclaim (worst seed)", unit="points", digits=1),
    ),
)
