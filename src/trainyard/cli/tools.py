"""`trainyard tools status | build`."""

from __future__ import annotations

import json
import time
from typing import List, Optional

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from trainyard.toolchain import progress as progress_words
from trainyard.toolchain.build import ToolBuildError, build_tool, selected_tools
from trainyard.toolchain.versions import TOOL_GROUPS, all_tools, tools_in_group

tools_app = typer.Typer(help="The pinned upstream toolchain (built from Go modules, cached in ~/.cache/trainyard).",
                        no_args_is_help=True)
console = Console()


@tools_app.command("status")
def status(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List every pinned tool with its version, path and whether it is built."""
    rows = [
        {"tool": t.name, "version": t.version, "group": t.group, "path": str(t.bin_dir),
         "status": "built" if t.is_built() else "missing", "missing": t.missing_binaries()}
        for t in all_tools()
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("tool", "version", "status", "path")
    for row in rows:
        colour = "green" if row["status"] == "built" else "red"
        table.add_row(str(row["tool"]), str(row["version"]), f"[{colour}]{row['status']}[/]", str(row["path"]))
    console.print(table)


@tools_app.command("build")
def build(tools: Optional[List[str]] = typer.Argument(None, help="Tools to build (default: all)."),
          group: Optional[str] = typer.Option(None, "--group", help=f"Only one group: {' or '.join(TOOL_GROUPS)} "
                                              "(core: what `make up` needs; real-nodes: `--real-nodes N`).")) -> None:
    """Build what is missing, one log per tool; on failure name the tool and its log."""
    try:
        chosen = selected_tools(tools or [])
        if group is not None:
            in_group = {t.name for t in tools_in_group(group)}
            chosen = [t for t in chosen if t.name in in_group]
    except KeyError as exc:
        console.print(f"[red]error:[/] {exc.args[0]}")
        raise typer.Exit(2)
    started = time.monotonic()
    missing = [item for item in chosen if not item.is_built()]
    measured = {t.name: seconds for t in missing if t.log_file.is_file()
                and (seconds := progress_words.last_build_seconds(t.log_file.read_text(errors="replace"))) is not None}
    for item in chosen:
        if item.is_built():
            console.print(f"{item.name} {item.version}: already built")
    if missing:
        console.print(f"{len(missing)} tool(s) to build, about "
                      f"{progress_words.duration(sum(progress_words.expected_seconds(t, measured) for t in missing))}; "
                      f"logs in {missing[0].log_file.parent}")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        for index, item in enumerate(missing):
            console.print(progress_words.starting(index, missing, measured, time.monotonic() - started))
            task = progress.add_task(f"{item.name} {item.version}", total=1)

            def on_step(text: str, task_id: TaskID = task, name: str = f"{item.name} {item.version}") -> None:
                progress.update(task_id, description=f"{name}: {text[:90]}")

            try:
                result = build_tool(item, on_step=on_step)
            except ToolBuildError as exc:
                progress.stop()
                console.print(f"[red]error:[/] {exc}")
                raise typer.Exit(1)
            progress.remove_task(task)
            console.print(progress_words.finished(index, missing, measured, result.seconds,
                                                  time.monotonic() - started))
    console.print(f"toolchain ready in {time.monotonic() - started:.0f}s")
