"""The platform's memory, read from its Prometheus (the usage record `cluster up` starts, or a stack's by URL).

record, prometheus: a window's facts as plain values, and the HTTP reads that fill them;
account, render, series, plots, report_part: `trainyard usage` and `report --since` (pure but the plots);
fairness_audit: shares against entitlement while saturated, starvation, Jain's index (pure);
budgets, budget_enforcer: tenant GPU-hour budgets (pure) and the controller's loop that applies them;
stalls, stall_watcher: TrainJobs holding GPUs without progress (pure) and the controller's loop that flags them.
"""
