"""The `trainyard` command line: one Typer app, each area registers its own commands."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="trainyard: a multi-tenant GPU training platform on Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def _register() -> None:
    from trainyard.toolchain.commands import tools_app
    from trainyard.cluster.commands import cluster_app, register_top_level

    app.add_typer(tools_app, name="tools")
    app.add_typer(cluster_app, name="cluster")
    register_top_level(app)
    from trainyard.controller.run_command import controller_app

    app.add_typer(controller_app, name="controller")
    try:
        from trainyard.controller.commands import register as register_controller
    except ImportError:  # pragma: no cover - area not installed yet
        pass
    else:
        register_controller(app)
    try:
        from trainyard.runtimes.commands import catalog_app
    except ImportError:  # pragma: no cover
        pass
    else:
        app.add_typer(catalog_app, name="catalog")


_register()


def main() -> None:
    app()


if __name__ == "__main__":  # `python -m trainyard.cli`, used for local controller processes
    main()
