"""The benchmark of day-2 events under load: simulated nodes dying while the scheduling trace runs."""

from __future__ import annotations

from trainyard.benchmarks.declarations import ZERO, Bench, Figure

NODE_LOSS_TRACE = Bench(
    name="node_loss_trace",
    script="bench/node_loss_trace.py",
    measures="The scheduling trace (150 jobs, 64 simulated nodes x 8 GPUs, the shipped `gang` profile, the tenants' "
             "60 s node-loss toleration) with the two nodes holding the most gang pods powered off once the cluster "
             "is saturated and back six minutes later: what the report and Volcano's queues count against what pods "
             "on Ready nodes hold, and what becomes of the jobs hit; each run a different trace.",
    repeat_args=("--seed", "{seed}"),
    seeds=(12, 13, 14),
    long=True,
    minutes=16.0,
    notes=("Volcano's excess is its queues' `status.allocated` GPUs minus the GPUs of pods bound to Ready nodes; "
           "before the kill it shows Volcano's own lag between sessions, settled is from the moment the dead nodes' "
           "evicted pods are due to be deleted for good (NotReady + toleration + grace + release delay + two loop "
           "periods + 15 s) until the nodes come back.",),
    figures=(
        Figure("not_ready_s", "not_ready_s", "power-off to both nodes NotReady", unit="s", digits=0),
        Figure("report_on_lost", "report_gpus_on_lost_max", "GPUs the report counts on a lost node (most)", digits=0,
               target=ZERO),
        Figure("volcano_excess_before", "volcano_excess_before_max", "Volcano's excess before the kill (most)",
               unit="GPUs", digits=0),
        Figure("volcano_excess_peak", "volcano_excess_peak", "Volcano's excess while nodes are lost (most)",
               unit="GPUs", digits=0),
        Figure("volcano_excess_settled", "volcano_excess_settled_max", "Volcano's excess once settled (most)",
               unit="GPUs", digits=0),
        Figure("pods_on_lost_settled", "pods_on_lost_settled_max", "pod objects left on lost nodes once settled",
               digits=0, target=ZERO),
        Figure("hit_jobs", "hit_jobs", "jobs with a pod on a killed node", digits=0),
        Figure("hit_without_event", "hit_without_node_lost_event#", "hit jobs without a NodeLost Event", digits=0,
               target=ZERO),
        Figure("hit_unfinished", "hit_unfinished_count", "hit jobs that never finished", digits=0, target=ZERO),
        Figure("reformed_max", "reformed_max_s", "kill to the slowest hit job whole again", unit="s", digits=0),
        Figure("rejoined", "rejoined_s", "node-up to both nodes Ready", unit="s", digits=0),
        Figure("pods_on_rejoined", "pods_bound_on_rejoined", "pods bound on the rejoined nodes afterwards", digits=0),
        Figure("unfinished", "unfinished_count", "trace jobs unfinished", digits=0, target=ZERO),
        Figure("seconds", "seconds", "wall time of a run", unit="s", digits=0),
    ),
)
