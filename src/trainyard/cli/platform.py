"""`trainyard platform up | preview | destroy | validate`: thin Typer commands over trainyard.stack_deploy
and the stack checks (`validate` runs offline: no Pulumi, no cluster)."""

from __future__ import annotations

from typing import List, Optional

import typer
from rich.console import Console

from trainyard import stack_deploy

platform_app = typer.Typer(help="The platform program (Pulumi) on one environment's stack.", no_args_is_help=True)
console = Console()
STACK = typer.Option(stack_deploy.LOCAL_STACK, "--stack", "-s", help="Stack = environment (stacks/Pulumi.<stack>.yaml).")
CLUSTER = typer.Option(stack_deploy.DEFAULT_CLUSTER, "--cluster",
                       help="The local cluster a local-controllers stack (the local stack) deploys onto.")
EXTRA = typer.Argument(None, help="Extra pulumi flags (after --).")


def _guarded(action, *args) -> None:
    try:
        action(*args)
    except stack_deploy.StackError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1)


@platform_app.command("up")
def up(stack: str = STACK, cluster: str = CLUSTER, extra: Optional[List[str]] = EXTRA) -> None:
    """`pulumi up` of the stack (non-interactive), then a refresh."""
    _guarded(stack_deploy.up, stack, extra or [], cluster)


@platform_app.command("preview")
def preview(stack: str = STACK, cluster: str = CLUSTER, extra: Optional[List[str]] = EXTRA) -> None:
    """`pulumi preview` of the stack (add `-- --policy-pack platform/policy_pack` for the guardrails)."""
    _guarded(stack_deploy.run, stack, "preview", extra or [], cluster)


@platform_app.command("destroy")
def destroy(stack: str = STACK, cluster: str = CLUSTER) -> None:
    """`pulumi destroy` of the stack (CRDs are retained unless the stack opts out)."""
    _guarded(stack_deploy.run, stack, "destroy", [], cluster)


@platform_app.command("validate")
def validate(stack: str = STACK) -> None:
    """Check the stack file offline with the same rules `pulumi up` applies; exit 1 on errors."""
    code = stack_deploy.validate(stack, echo=typer.echo)
    if code:
        raise typer.Exit(code)
