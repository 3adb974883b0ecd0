"""`trainyard controller run`: the TrainJob controller process (also the container entrypoint)."""

from __future__ import annotations

import json
import logging
import signal
import sys
from pathlib import Path
from typing import Optional

import typer

from .feature_gates import TRAINJOB_STATUS, parse_feature_gates
from .ratelimit import UPSTREAM_BURST, UPSTREAM_QPS, client_limiter

controller_app = typer.Typer(help="trainyard's TrainJob controller (Kubeflow Trainer v2 compatible).",
                             no_args_is_help=True)


class JsonFormatter(logging.Formatter):
    """One JSON object per line; messages that are already JSON are merged in."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname.lower(),
                 "logger": record.name}
        message = record.getMessage()
        try:
            payload = json.loads(message)
            entry.update(payload if isinstance(payload, dict) else {"msg": message})
        except ValueError:
            entry["msg"] = message
        return json.dumps(entry)


@controller_app.command("run")
def run(
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="Default: in-cluster, then ~/.kube/config."),
    workers: int = typer.Option(5, help="Concurrent reconciles (upstream default 5)."),
    leader_elect: bool = typer.Option(True, "--leader-elect/--no-leader-elect"),
    lease_namespace: str = typer.Option("trainyard-system", help="Namespace of the leader-election Lease."),
    metrics_address: str = typer.Option("127.0.0.1:8080", help="host:port of the Prometheus endpoint."),
    health_address: str = typer.Option("127.0.0.1:8081", help="host:port of /healthz and /readyz."),
    webhook_address: Optional[str] = typer.Option(None, help="host:port to serve admission webhooks on (HTTPS)."),
    cert_dir: Optional[str] = typer.Option(None, help="Directory with tls.crt and tls.key for the webhook server."),
    feature_gates: str = typer.Option("", "--feature-gates",
                                      help="Comma-separated Name=true|false; known: TrainJobStatus (alpha, off)."),
    status_address: str = typer.Option("0.0.0.0:10443", help="host:port of the status server (TrainJobStatus)."),
    status_url: Optional[str] = typer.Option(None, help="https://host:port pods use to reach the status server "
                                             "(TrainJobStatus; e.g. https://<service>.<namespace>.svc:10443)."),
    kube_api_qps: float = typer.Option(UPSTREAM_QPS, help="Client-side requests per second to the API server "
                                       "(upstream's clientConnection.qps default); negative: no limit."),
    kube_api_burst: int = typer.Option(UPSTREAM_BURST, help="Requests allowed above the qps after a quiet spell "
                                       "(upstream's clientConnection.burst default)."),
    log_level: str = typer.Option("info"),
) -> None:
    """Run the controller until SIGTERM."""
    try:
        gates = parse_feature_gates(feature_gates)
    except ValueError as err:
        typer.echo(f"error: --feature-gates: {err}", err=True)
        raise typer.Exit(2)
    if gates.get(TRAINJOB_STATUS) and not (cert_dir and status_url and status_url.startswith("https://")):
        typer.echo("error: TrainJobStatus needs --cert-dir (tls.crt, tls.key, ca.crt) and --status-url https://host:port",
                   err=True)
        raise typer.Exit(2)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=log_level.upper(), handlers=[handler], force=True)
    from .apiserver import ApiServer
    from .manager import Manager, Settings

    if kube_api_qps == 0 or kube_api_burst < 1:
        typer.echo("error: --kube-api-qps must be > 0 (or negative for no limit) and --kube-api-burst >= 1", err=True)
        raise typer.Exit(2)
    api = ApiServer.from_kubeconfig(kubeconfig, connections=max(16, workers * 2),
                                    limiter=client_limiter(kube_api_qps, kube_api_burst))
    status_server = None
    if gates.get(TRAINJOB_STATUS):
        from .plugins.trainjobstatus import StatusServerConfig
        from .status_server import FIELD_MANAGER, StatusServer, serve_status

        status_server = StatusServerConfig(base_url=status_url, ca_pem=(Path(cert_dir) / "ca.crt").read_text())
        serve_status(StatusServer(api.token_review, lambda body: api.apply_status(body, FIELD_MANAGER)),
                     status_address, cert_dir)
    manager = Manager(api, Settings(workers=workers, leader_elect=leader_elect, lease_namespace=lease_namespace,
                                    metrics_address=metrics_address, health_address=health_address,
                                    status_server=status_server))
    if webhook_address:
        if not cert_dir:
            typer.echo("error: --webhook-address needs --cert-dir with tls.crt and tls.key", err=True)
            raise typer.Exit(2)
        from .webhook_server import serve_webhooks

        serve_webhooks(manager.admission_reads, webhook_address, cert_dir)
    signal.signal(signal.SIGTERM, lambda *_: manager.shutdown())
    signal.signal(signal.SIGINT, lambda *_: manager.shutdown())
    manager.run()
