"""`trainyard docs reference`: write, or check, the reference pages generated from the code."""

from __future__ import annotations

import typer

docs_app = typer.Typer(help="Documentation generated from the code.", no_args_is_help=True)


@docs_app.command("reference")
def reference(
    ctx: typer.Context,
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 naming each page that differs from "
                                                      "what the code generates."),
) -> None:
    """Write docs/reference/cli.md, stack.md and admission.md from the code (the CLI, the stack model, the
    admission rules)."""
    from trainyard.docs_reference import REFERENCE_DIR, reference_pages, stale_pages
    from trainyard.paths import repo_root

    directory = repo_root() / REFERENCE_DIR
    pages = reference_pages(ctx.find_root().command)  # the whole `trainyard` command tree
    stale = stale_pages(directory, pages)
    if check:
        for name in stale:
            typer.echo(f"{REFERENCE_DIR / name} is stale: run `trainyard docs reference`", err=True)
        raise typer.Exit(1 if stale else 0)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (directory / name).write_text(text, encoding="utf-8")
    typer.echo(f"wrote {', '.join(str(REFERENCE_DIR / n) for n in pages)}"
               + (f" ({len(stale)} changed)" if stale else " (unchanged)"))
