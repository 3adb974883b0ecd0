"""The benchmarks of trainyard's predictions: the start estimates (replayed and live) and the model's calibration."""

from __future__ import annotations

from trainyard.benchmarks.declarations import Bench, Figure, Target


def _estimate_errors(mode: str, words: str, second_digits: int = 0) -> tuple[Figure, ...]:
    """Errors in seconds shown with `second_digits` decimals (a compressed live replay's are under a second)."""
    return (Figure(f"{mode}_median_s", f"{mode}.median_error_s", f"{words}: absolute error, median", unit="s",
                   digits=second_digits),
            Figure(f"{mode}_p90_s", f"{mode}.p90_error_s", f"{words}: absolute error, p90", unit="s",
                   digits=second_digits),
            Figure(f"{mode}_median_share", f"{mode}.median_error_share", f"{words}: error / real wait, median",
                   unit="%", scale=100.0, digits=0),
            Figure(f"{mode}_p90_share", f"{mode}.p90_error_share", f"{words}: error / real wait, p90", unit="%", scale=100.0,
                   digits=0))


ESTIMATES = Bench(
    name="start_estimates",
    script="bench/start_estimates.py",
    measures="The start estimates against when each waiting job really started, on the scheduling trace's real "
             "replays of the seeds the model was not calibrated on: with the shipped default run time (jobs without "
             "trainerStatus) and with each job's true run time.",
    args=("--records", "bench/results/scheduling_trace.json"),
    needs=("scheduling_trace",),
    notes=("Deterministic over the same replays: the spread is in the replays' seeds, shown per seed in the file.",),
    figures=(
        Figure("jobs_scored", "shipped_default.jobs_scored", "jobs that waited 10 s or more", digits=0),
        *_estimate_errors("shipped_default", "shipped default (no trainerStatus)"),
        Figure("shipped_default_given_share", "shipped_default.given_share",
               "shipped default: jobs told a time (the rest are told there is no estimate)", unit="%", scale=100.0,
               digits=0),
        Figure("shipped_default_given_median_share", "shipped_default.given.median_error_share",
               "shipped default, jobs told a time: error / real wait, median", unit="%", scale=100.0, digits=0),
        *_estimate_errors("true_run_time", "true run time (trainerStatus)"),
    ),
)

def _every_estimate(mode: str, words: str) -> tuple[Figure, ...]:
    return (Figure(f"{mode}_every_given_share", f"{mode}.every_estimate.given_share",
                   f"{words}, every estimate written while jobs waited: told a time", unit="%", scale=100.0, digits=0),
            Figure(f"{mode}_every_median_share", f"{mode}.every_estimate.median_error_share",
                   f"{words}, every estimate told a time: error / wait still ahead, median", unit="%", scale=100.0,
                   digits=0))


ESTIMATES_LIVE = Bench(
    name="start_estimates_live",
    script="bench/start_estimates_live.py",
    measures="The start estimates users are told, live: the first TrainJobStartEstimate Event on each TrainJob that "
             "waited, against when it really started, on generated traces of the local stack (seeds no calibration "
             "used) replayed through the real scheduler and controllers; with the shipped default (no trainerStatus) "
             "and with every trainer reporting the time it has left.",
    args=("--seeds", "41,42", "--jobs", "24", "--speedup", "2"),
    repeats=1,
    long=True,
    minutes=35.0,
    notes=("One run over both seeds (each seed a cluster per variant); the per-seed figures and every job's "
           "estimate are in the file. With the shipped default no job may be told a time on its first Event, so its "
           "errors are in the file, not figures.",),
    figures=(
        Figure("shipped_default_jobs", "shipped_default.jobs_scored", "shipped default: jobs that waited 10 s or more",
               digits=0),
        Figure("shipped_default_given_share", "shipped_default.given_share",
               "shipped default: jobs told a time (the rest are told there is no estimate)", unit="%", scale=100.0,
               digits=0),
        Figure("shipped_default_every_given_share", "shipped_default.every_estimate.given_share",
               "shipped default, every estimate written while jobs waited: told a time", unit="%", scale=100.0,
               digits=0),
        Figure("trainer_status_jobs", "trainer_status.jobs_scored", "trainerStatus: jobs that waited 10 s or more",
               digits=0),
        Figure("trainer_status_given_share", "trainer_status.given_share",
               "trainerStatus: jobs told a time", unit="%", scale=100.0, digits=0),
        *_estimate_errors("trainer_status", "trainerStatus, jobs told a time", second_digits=1),
        *_every_estimate("trainer_status", "trainerStatus"),
    ),
)

CALIBRATION = Bench(
    name="model_calibration",
    script="bench/model_calibration.py",
    measures="trainyard's model of vc-scheduler (behind `platform whatif` and the start estimates) against the real "
             "scheduler: each real replay of the scheduling trace replayed on the model, allocation, goodput and each "
             "tenant's share compared in points; the worst errors over the seeds the model was not calibrated on.",
    args=("--records", "bench/results/scheduling_trace.json"),
    quick_args=("--records", "bench/results/scheduling_trace.json", "--tie-seeds", "2"),
    needs=("scheduling_trace",),
    notes=("Deterministic over the same replays (five tie-break seeds of the model, averaged): the spread is in the "
           "replays' seeds, shown per seed in the file.",),
    figures=(
        Figure("allocation_error", "max_allocation_error_points", "worst allocation error, out of sample",
               unit="points", digits=1, target=Target("<=", 3)),
        Figure("goodput_error", "max_goodput_error_points", "worst goodput error, out of sample", unit="points",
               digits=1),
        Figure("share_error", "max_share_error_points", "worst tenant share error, out of sample", unit="points",
               digits=1, target=Target("<=", 3)),
    ),
)
