"""`trainyard controller run`: the TrainJob controller process (also the container entrypoint).

Local clusters start it as `python -m trainyard.cli.controller run ...`, which imports this module and the
controller runtime, not every command of the CLI.
"""

from __future__ import annotations

from typing import Optional

import typer

from trainyard.controller.runtime.ratelimit import UPSTREAM_BURST, UPSTREAM_QPS
from trainyard.controller.runtime.run_command import RunOptions, UsageError, run
from trainyard.tenant_policy import DEFAULT_GANG_START_TIMEOUT_SECONDS, DEFAULT_NODE_LOSS_RELEASE_AFTER_SECONDS

controller_app = typer.Typer(help="trainyard's TrainJob controller (Kubeflow Trainer v2 compatible).",
                             no_args_is_help=True)
DEFAULTS = RunOptions()


@controller_app.callback()
def controller_group() -> None:
    """trainyard's TrainJob controller (Kubeflow Trainer v2 compatible)."""


@controller_app.command("run")
def run_command(
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="Default: in-cluster, then ~/.kube/config."),
    workers: int = typer.Option(DEFAULTS.workers, help="Concurrent reconciles (upstream default 5)."),
    leader_elect: bool = typer.Option(DEFAULTS.leader_elect, "--leader-elect/--no-leader-elect"),
    lease_namespace: str = typer.Option(DEFAULTS.lease_namespace, help="Namespace of the leader-election Lease."),
    metrics_address: str = typer.Option(DEFAULTS.metrics_address, help="host:port of the Prometheus endpoint."),
    metrics_secure: bool = typer.Option(DEFAULTS.metrics_secure, "--metrics-secure/--no-metrics-secure",
                                        help="Serve /metrics over HTTPS with --cert-dir's pair."),
    metrics_auth: bool = typer.Option(DEFAULTS.metrics_auth, "--metrics-auth/--no-metrics-auth",
                                      help="Answer /metrics only to callers the API server authenticates and lets "
                                      "get the URL /metrics (needs --metrics-secure)."),
    health_address: str = typer.Option(DEFAULTS.health_address, help="host:port of /healthz and /readyz."),
    webhook_address: Optional[str] = typer.Option(None, help="host:port to serve admission webhooks on (HTTPS)."),
    cert_dir: Optional[str] = typer.Option(None, help="Directory with tls.crt and tls.key for the webhook server."),
    webhook_client_ca: Optional[str] = typer.Option(None, "--webhook-client-ca", help="PEM CA that signed the API "
                                                    "server's webhook client certificate: the webhooks then answer "
                                                    "only it (any other client fails the TLS handshake)."),
    feature_gates: str = typer.Option("", "--feature-gates",
                                      help="Comma-separated Name=true|false; known: TrainJobStatus (alpha, off)."),
    status_address: str = typer.Option(DEFAULTS.status_address, help="host:port of the status server (TrainJobStatus)."),
    status_url: Optional[str] = typer.Option(None, help="https://host:port pods use to reach the status server "
                                             "(TrainJobStatus; e.g. https://<service>.<namespace>.svc:10443)."),
    kube_api_qps: float = typer.Option(UPSTREAM_QPS, help="Client-side requests per second to the API server "
                                       "(upstream's clientConnection.qps default); negative: no limit."),
    kube_api_burst: int = typer.Option(UPSTREAM_BURST, help="Requests allowed above the qps after a quiet spell "
                                       "(upstream's clientConnection.burst default)."),
    log_level: str = typer.Option(DEFAULTS.log_level),
    start_estimates_every: float = typer.Option(60.0, "--start-estimates-every", min=0,
                                                help="Seconds between rounds of start estimates written as Events "
                                                "on waiting TrainJobs (0: none)."),
    default_run: float = typer.Option(3600.0, "--default-run", min=1,
                                      help="Seconds a job runs when its trainer reports no estimate (start estimates)."),
    prometheus: Optional[str] = typer.Option(None, "--prometheus", help="URL of the platform's Prometheus (the usage "
                                             "record): tenant budgets are enforced only with one."),
    budgets_every: float = typer.Option(60.0, "--budgets-every", min=0,
                                        help="Seconds between rounds of budget enforcement (0: none)."),
    stalled_after: float = typer.Option(1800.0, "--stalled-after", min=0,
                                        help="Seconds a TrainJob may hold GPUs without trainerStatus progress before "
                                        "it is flagged stalled (0: no stall watch)."),
    stalled_log_after: float = typer.Option(0.0, "--stalled-log-after", min=0,
                                            help="Without trainerStatus: seconds with no new log line of its first "
                                            "pod (0: not judged by logs)."),
    stalled_action: str = typer.Option("none", "--stalled-action", help="What a stall does beyond a Warning: none "
                                       "or suspend."),
    reclaim: str = typer.Option("none", "--reclaim", help="Gang-aware reclaim: none, or the rule by which a waiting "
                                "gang of a queue below its share gets whole TrainJobs of queues above theirs "
                                "suspended (deserved, final-share, fair-sharing)."),
    reclaim_holds: bool = typer.Option(True, "--reclaim-holds/--no-reclaim-holds",
                                       help="Taint the nodes an eviction frees for its gang until it runs."),
    node_loss_every: float = typer.Option(10.0, "--node-loss-every", min=0,
                                          help="Seconds between rounds that tell each TrainJob with pods on a lost "
                                          "node (Ready False or Unknown) what follows, in a NodeLost Event (0: none)."),
    node_loss_release_after: float = typer.Option(DEFAULT_NODE_LOSS_RELEASE_AFTER_SECONDS, "--node-loss-release-after",
                                                  min=-1,
                                                  help="Seconds after an evicted TrainJob pod's grace period ends, "
                                                  "its node still lost, before it is deleted for good so JobSet "
                                                  "can recreate the gang (-1: never; an operator's out-of-service "
                                                  "taint or the node's return does it)."),
    gang_start_timeout: float = typer.Option(DEFAULT_GANG_START_TIMEOUT_SECONDS, "--gang-start-timeout", min=0,
                                             help="Seconds an admitted gang may hold its queue while the API server "
                                             "refuses its pods for a reason that may pass (a full quota) before it "
                                             "is released to wait again (0: never)."),
) -> None:
    """Run the controller until SIGTERM."""
    options = RunOptions(kubeconfig=kubeconfig, workers=workers, leader_elect=leader_elect,
                         lease_namespace=lease_namespace, metrics_address=metrics_address,
                         metrics_secure=metrics_secure, metrics_auth=metrics_auth,
                         health_address=health_address, webhook_address=webhook_address, cert_dir=cert_dir,
                         webhook_client_ca=webhook_client_ca,
                         feature_gates=feature_gates, status_address=status_address, status_url=status_url,
                         kube_api_qps=kube_api_qps, kube_api_burst=kube_api_burst, log_level=log_level,
                         gang_start_timeout=gang_start_timeout,
                         companions=start_estimates(start_estimates_every, default_run)
                         + budgets(prometheus, budgets_every)
                         + stall_watch(stalled_after, stalled_log_after, stalled_action)
                         + gang_reclaim(reclaim, reclaim_holds) + node_loss(node_loss_every, node_loss_release_after))
    try:
        run(options)
    except UsageError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2)


def start_estimates(every_s: float, default_run_s: float) -> tuple:
    """The start-estimate loop beside the controller (`capacity.start_estimator`), unless `every_s` is 0."""
    if every_s <= 0:
        return ()

    def factory(api, leading, metrics=None):
        from trainyard.capacity.start_estimator import StartEstimator

        return StartEstimator(api, period=every_s, default_run_s=default_run_s, leading=leading)

    return (factory,)


def node_loss(every_s: float, release_after_s: float) -> tuple:
    """The node-loss loop beside the controller (`capacity.node_loss_watcher`), unless `every_s` is 0."""
    if every_s <= 0:
        return ()

    def factory(api, leading, metrics=None):
        from trainyard.capacity.node_loss_watcher import NodeLossWatcher

        return NodeLossWatcher(api, period=every_s, leading=leading,
                               release_after_s=None if release_after_s < 0 else release_after_s)

    return (factory,)


def budgets(prometheus: str | None, every_s: float) -> tuple:
    """The budget loop beside the controller (`usage.budget_enforcer`): with a Prometheus and `every_s` above 0."""
    if not prometheus or every_s <= 0:
        return ()

    def factory(api, leading, metrics=None):
        from trainyard.usage.budget_enforcer import BudgetEnforcer
        from trainyard.usage.prometheus import Prometheus

        return BudgetEnforcer(api, Prometheus(prometheus), period=every_s, leading=leading)

    return (factory,)


def stall_watch(after_s: float, after_log_s: float, action: str) -> tuple:
    """The stalled-job loop beside the controller (`usage.stall_watcher`), unless both times are 0."""
    from trainyard.tenant_policy import STALL_ACTIONS

    if action not in STALL_ACTIONS:
        typer.echo(f"error: --stalled-action {action!r}: use one of {', '.join(STALL_ACTIONS)}", err=True)
        raise typer.Exit(2)
    if after_s <= 0 and after_log_s <= 0:
        return ()

    def factory(api, leading, metrics=None):
        from trainyard.usage.stall_watcher import StallWatcher

        every = max(5.0, min(60.0, min(t for t in (after_s, after_log_s) if t > 0) / 4))
        return StallWatcher(api, after_s=after_s, action=action, period=every, after_log_s=after_log_s,
                            leading=leading)

    return (factory,)


def gang_reclaim(rule: str, holds: bool) -> tuple:
    """The gang-aware reclaim loop beside the controller (`capacity.reclaimer`), unless `rule` is none: toward
    each queue's deserved share as its Volcano Queue declares it (a fixed target, as Kueue's weights are: measured
    on the trace, a target that moved with demand made queues evict each other back and forth)."""
    from trainyard.tenant_policy import RECLAIM_CHOICES

    if rule not in RECLAIM_CHOICES:
        typer.echo(f"error: --reclaim {rule!r}: use one of {', '.join(RECLAIM_CHOICES)}", err=True)
        raise typer.Exit(2)
    if rule == "none":
        return ()

    def factory(api, leading, metrics=None):
        from trainyard.capacity.reclaimer import Reclaimer

        lost = (lambda namespace, seconds: metrics.reclaim_lost.labels(namespace).inc(seconds)) if metrics else None
        return Reclaimer(api, rule=rule, holds=holds, leading=leading, on_lost=lost)

    return (factory,)


if __name__ == "__main__":
    controller_app()
