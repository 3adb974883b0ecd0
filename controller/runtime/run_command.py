"""The TrainJob controller process: API client, manager, webhook and status servers, until SIGTERM.

`trainyard controller run` (`trainyard/cli/controller.py`, also the container entrypoint) parses the options
and calls `run`; a bad combination of options raises `UsageError` before anything starts.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from trainyard.timestamps import format_micro_time

from ..feature_gates import TRAINJOB_STATUS, parse_feature_gates
from .ratelimit import UPSTREAM_BURST, UPSTREAM_QPS, client_limiter


class UsageError(ValueError):
    """Options that cannot run together; the message names the option and the fix."""


class JsonFormatter(logging.Formatter):
    """One JSON object per line; messages that are already JSON are merged in."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = format_micro_time(dt.datetime.fromtimestamp(record.created, dt.timezone.utc))
        entry = {"ts": stamp, "level": record.levelname.lower(),
                 "logger": record.name}
        message = record.getMessage()
        try:
            payload = json.loads(message)
            entry.update(payload if isinstance(payload, dict) else {"msg": message})
        except ValueError:
            entry["msg"] = message
        if record.exc_info:  # `log.exception`: what failed and where, else an error line says nothing
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


@dataclass(frozen=True)
class RunOptions:
    """What `trainyard controller run` takes (defaults as upstream's where it has one)."""

    kubeconfig: str | None = None
    workers: int = 5
    leader_elect: bool = True
    lease_namespace: str = "trainyard-system"
    metrics_address: str = "127.0.0.1:8080"
    metrics_secure: bool = False
    """/metrics over HTTPS with --cert-dir's pair (Kubeflow Trainer v2.4's metrics.secureServing)."""
    metrics_auth: bool = False
    """/metrics only to callers the API server lets get it (v2.4's metrics.auth.enabled); needs metrics_secure."""
    health_address: str = "127.0.0.1:8081"
    webhook_address: str | None = None
    cert_dir: str | None = None
    webhook_client_ca: str | None = None
    feature_gates: str = ""
    status_address: str = "0.0.0.0:10443"
    status_url: str | None = None
    kube_api_qps: float = UPSTREAM_QPS
    kube_api_burst: int = UPSTREAM_BURST
    log_level: str = "info"
    gang_start_timeout: float = 0.0
    companions: tuple[Callable[[Any, Callable[[], bool], Any], Any], ...] = ()
    """Loops beside the controller: each factory(api, leading, metrics) makes one (`metrics`: the manager's)."""
    """Loops run beside the manager, each made as `factory(api, leading)` (`leading()`: this replica holds the
    lease) and given `start()` and `halt()`: what the CLI adds from above this layer (start estimates, budgets,
    stalls). Their `api` answers plain lists and gets of the kinds the manager watches (TrainJobs, PodGroups,
    Namespaces, Queues, ...) from its stores, so a loop's round costs the API server no list of them."""


def check_options(options: RunOptions) -> dict[str, bool]:
    """The parsed feature gates; raises UsageError for options that cannot run together."""
    try:
        gates = parse_feature_gates(options.feature_gates)
    except ValueError as err:
        raise UsageError(f"--feature-gates: {err}") from None
    status_url = options.status_url or ""
    if gates.get(TRAINJOB_STATUS) and not (options.cert_dir and status_url.startswith("https://")):
        raise UsageError("TrainJobStatus needs --cert-dir (tls.crt, tls.key, ca.crt) and --status-url https://host:port")
    if options.kube_api_qps == 0 or options.kube_api_burst < 1:
        raise UsageError("--kube-api-qps must be > 0 (or negative for no limit) and --kube-api-burst >= 1")
    if options.webhook_client_ca and not Path(options.webhook_client_ca).is_file():
        raise UsageError(f"--webhook-client-ca: {options.webhook_client_ca} is not a file (the PEM CA that signed the "
                         "API server's webhook client certificate)")
    if options.webhook_address and not options.cert_dir:
        raise UsageError("--webhook-address needs --cert-dir with tls.crt and tls.key")
    if options.metrics_secure and not options.cert_dir:
        raise UsageError("--metrics-secure needs --cert-dir with tls.crt and tls.key (the webhook's serving pair)")
    if options.metrics_auth and not options.metrics_secure:
        raise UsageError("--metrics-auth needs --metrics-secure: a bearer token must not cross the network in clear")
    return gates


def run(options: RunOptions) -> None:
    """Run the controller until SIGTERM."""
    gates = check_options(options)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=options.log_level.upper(), handlers=[handler], force=True)
    from .apiserver import ApiServer
    from .manager import Manager, Settings

    api = ApiServer.from_kubeconfig(options.kubeconfig, connections=max(16, options.workers * 2),
                                    limiter=client_limiter(options.kube_api_qps, options.kube_api_burst))
    status_server = None
    if gates.get(TRAINJOB_STATUS) and options.cert_dir and options.status_url:
        from ..plugins.framework import StatusServerConfig
        from .status_server import FIELD_MANAGER, StatusServer, serve_status

        status_server = StatusServerConfig(base_url=options.status_url,
                                           ca_pem=(Path(options.cert_dir) / "ca.crt").read_text())
        from .apiserver import RESOURCES

        serve_status(StatusServer(api.token_review, lambda body: api.apply_status(body, FIELD_MANAGER),
                                  read_trainjob=lambda namespace, name: api.get(RESOURCES["TrainJob"], name, namespace)),
                     options.status_address, options.cert_dir)
    manager = Manager(api, Settings(workers=options.workers, leader_elect=options.leader_elect,
                                    lease_namespace=options.lease_namespace,
                                    metrics_address=options.metrics_address, health_address=options.health_address,
                                    status_server=status_server, gang_start_timeout=options.gang_start_timeout,
                                    metrics_cert_dir=options.cert_dir if options.metrics_secure else None,
                                    metrics_auth=options.metrics_auth))
    if options.webhook_address and options.cert_dir:
        from .webhook_server import serve_webhooks

        serve_webhooks(manager.admission_reads, options.webhook_address, options.cert_dir, options.webhook_client_ca)
    signal.signal(signal.SIGTERM, lambda *_: manager.shutdown())
    signal.signal(signal.SIGINT, lambda *_: manager.shutdown())
    elector = manager.elector
    leading = (lambda: True) if elector is None else elector.holds_lease
    running = [factory(manager.admission_reads, leading, manager.metrics).start() for factory in options.companions]
    try:
        manager.run()
    finally:
        for companion in running:
            companion.halt()
