"""The `trainyard` command line: one Typer app, each area registers its own commands."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="trainyard: a multi-tenant GPU training platform on Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def _register() -> None:
    """Each area owns its commands; the CLI only assembles them."""
    from trainyard.cli.bench import bench_app
    from trainyard.cli.capacity import register as register_capacity
    from trainyard.cli.catalog import catalog_app
    from trainyard.cli.cluster import cluster_app, register_top_level
    from trainyard.cli.controller import controller_app
    from trainyard.cli.docs import docs_app
    from trainyard.cli.jobs import register as register_jobs
    from trainyard.cli.platform import platform_app
    from trainyard.cli.tools import tools_app
    from trainyard.cli.usage import register as register_usage

    app.add_typer(tools_app, name="tools")
    app.add_typer(cluster_app, name="cluster")
    app.add_typer(platform_app, name="platform")
    app.add_typer(catalog_app, name="catalog")
    app.add_typer(controller_app, name="controller")
    app.add_typer(bench_app, name="bench")
    app.add_typer(docs_app, name="docs")
    register_jobs(app)
    register_top_level(app)
    register_capacity(app)
    register_usage(app)


_register()


def main() -> None:
    app()
