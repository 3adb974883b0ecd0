"""`trainyard platform up | preview | destroy`: the pinned Pulumi CLI on a stack, offline."""

from __future__ import annotations

import subprocess
from typing import List, Optional

import typer
from rich.console import Console

from trainyard.pulumi_env import install_plugins, run_pulumi
from trainyard.toolchain.build import ensure_built

platform_app = typer.Typer(help="The platform program (Pulumi) on one environment's stack.", no_args_is_help=True)
console = Console()
STACK = typer.Option("local", "--stack", "-s", help="Stack = environment (stacks/Pulumi.<stack>.yaml).")


def select_stack(stack: str) -> None:
    """Select the stack, creating its state in the local backend the first time."""
    if run_pulumi("stack", "select", stack, check=False, capture=True).returncode != 0:
        run_pulumi("stack", "init", stack, capture=True)


def _run(stack: str, *args: str) -> None:
    ensure_built("pulumi", "pulumi-kubernetes", "pulumi-policy-analyzer")
    install_plugins()
    select_stack(stack)
    try:
        run_pulumi(*args, "--stack", stack)
    except subprocess.CalledProcessError as exc:
        console.print(f"[red]error:[/] pulumi {args[0]} on stack {stack!r} failed (exit {exc.returncode})")
        raise typer.Exit(exc.returncode)


def forget_stack(stack: str) -> None:
    """Drop a stack's state without touching a cluster (used when its local cluster was deleted)."""
    from trainyard.toolchain.versions import tool

    if tool("pulumi").is_built():
        run_pulumi("stack", "rm", stack, "--yes", "--force", "--preserve-config", check=False, capture=True)


@platform_app.command("up")
def up(stack: str = STACK, extra: Optional[List[str]] = typer.Argument(None, help="Extra pulumi flags.")) -> None:
    """`pulumi up` of the stack (non-interactive), then a refresh.

    The refresh records the live state of objects the stack adopted (the local cluster pre-applies
    CRDs and webhook registrations); without it the provider's state of a few adopted CRDs lacks the
    annotations it applied, and the next preview shows a spurious update.
    """
    _run(stack, "up", "--yes", "--non-interactive", "--skip-preview", *(extra or []))
    _run(stack, "refresh", "--yes", "--non-interactive", "--skip-preview")


@platform_app.command("preview")
def preview(stack: str = STACK, extra: Optional[List[str]] = typer.Argument(None)) -> None:
    """`pulumi preview` of the stack (add `--policy-pack platform/policy_pack` for the guardrails)."""
    _run(stack, "preview", "--non-interactive", *(extra or []))


@platform_app.command("destroy")
def destroy(stack: str = STACK) -> None:
    """`pulumi destroy` of the stack (CRDs are retained unless the stack opts out)."""
    _run(stack, "destroy", "--yes", "--non-interactive", "--skip-preview")
