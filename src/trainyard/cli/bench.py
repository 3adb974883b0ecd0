"""`trainyard bench list | run | docs`: rerun a published figure with one command, and regenerate the docs' figures
from the results files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from trainyard.benchkit import RESULTS_DIR
from trainyard.benchmarks import docs as bench_docs
from trainyard.benchmarks.aggregate import FigureMissing, missed_targets
from trainyard.benchmarks.registry import BENCHES, bench_named
from trainyard.benchmarks.runner import run_bench
from trainyard.paths import repo_root

bench_app = typer.Typer(help="The benchmarks behind every published figure: list, rerun, regenerate the docs.",
                        no_args_is_help=True)

RESULTS = Path(RESULTS_DIR)
QUICK_RESULTS = Path("bench/out/quick")


def _documents(root: Path) -> dict[str, dict | None]:
    found = {}
    for bench in BENCHES:
        path = root / RESULTS / f"{bench.name}.json"
        try:
            found[bench.name] = json.loads(path.read_text()) if path.is_file() else None
        except json.JSONDecodeError:
            found[bench.name] = None
    return found


@bench_app.command("list")
def list_benches(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Every bench: what it measures, its runs, whether `--all` runs it, and its current results."""
    root = repo_root()
    documents = _documents(root)
    rows = [{"name": b.name, "script": b.script, "measures": b.measures, "repeats": b.repeats, "long": b.long,
             "minutes_per_run": b.minutes, "in_make_test": b.quick_args is not None,
             "results": str(RESULTS / f"{b.name}.json"), "current": bench_docs.is_current(documents[b.name])}
            for b in BENCHES]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        kind = "long, one by one" if row["long"] else "in --all"
        state = "current" if row["current"] else "no current results"
        typer.echo(f"{row['name']:<22} {row['repeats']} x ~{row['minutes_per_run']:g} min  {kind:<17} {state}")


@bench_app.command("run")
def run(names: Optional[List[str]] = typer.Argument(None, help="Benches to run (see `trainyard bench list`)."),
        run_all: bool = typer.Option(False, "--all", help="Every bench that is not long."),
        repeats: Optional[int] = typer.Option(None, "--repeats", min=1, help="Runs (default: the bench's own)."),
        quick: bool = typer.Option(False, "--quick", help="The reduced run `make test` makes, once; written under "
                                   f"{QUICK_RESULTS}, never quoted."),
        out: Optional[Path] = typer.Option(None, "--out", help=f"Results directory (default {RESULTS}).")) -> None:
    """Run benches, write each results file with provenance, median and spread; exit 1 when a target is missed."""
    if bool(names) == run_all:
        typer.echo("error: name the benches to run, or give --all (see `trainyard bench list`)", err=True)
        raise typer.Exit(2)
    try:
        chosen = [b for b in BENCHES if not b.long] if run_all else [bench_named(name) for name in names or []]
    except KeyError as exc:
        typer.echo(f"error: {exc.args[0]}", err=True)
        raise typer.Exit(2)
    if quick and (slow := [b.name for b in chosen if b.quick_args is None]):
        typer.echo(f"error: {', '.join(slow)} ha{'s' if len(slow) == 1 else 've'} no reduced run; drop --quick",
                   err=True)
        raise typer.Exit(2)
    root = repo_root()
    results_dir = out or (root / (QUICK_RESULTS if quick else RESULTS))
    missed: list[str] = []
    current = _documents(root)
    for bench in chosen:
        if run_all and (lacking := [n for n in bench.needs if not bench_docs.is_current(current.get(n))]):
            typer.echo(f"[bench {bench.name}] skipped: it reads the results of {', '.join(lacking)}, which have no "
                       f"current run (`trainyard bench run {lacking[0]}`)")
            continue
        try:
            document = run_bench(bench, root, results_dir, repeats=repeats, quick=quick, echo=typer.echo)
        except (RuntimeError, FigureMissing) as exc:  # a run that wrote nothing, or not the figures declared
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1)
        missed += missed_targets(document)
        typer.echo(f"[bench {bench.name}] wrote {results_dir / (bench.name + '.json')}")
    for line in missed:
        typer.echo(f"target missed: {line}", err=True)
    raise typer.Exit(1 if missed else 0)


def doc_files(root: Path) -> list[Path]:
    """Files that may quote figures between markers: the README and every page of docs/ but the generated one."""
    return [root / "README.md", *sorted(p for p in (root / "docs").rglob("*.md") if p.name != "benchmarks.md")]


@bench_app.command("docs")
def docs(check: bool = typer.Option(False, "--check", help="Change nothing; exit 1 naming each stale file.")) -> None:
    """Regenerate docs/benchmarks.md and every quoted figure from the results files."""
    root = repo_root()
    documents = _documents(root)
    wanted = {root / "docs" / "benchmarks.md": bench_docs.benchmarks_page(documents)}
    try:
        for path in doc_files(root):
            wanted[path] = bench_docs.refresh_markers(path.read_text(), documents)
    except bench_docs.StaleFigure as exc:
        typer.echo(f"error: {path.relative_to(root)}: {exc}", err=True)
        raise typer.Exit(1)
    stale = [path for path, text in wanted.items() if not path.is_file() or path.read_text() != text]
    if check:
        for path in stale:
            typer.echo(f"stale: {path.relative_to(root)} (run `trainyard bench docs`)", err=True)
        raise typer.Exit(1 if stale else 0)
    for path in stale:
        path.write_text(wanted[path])
        typer.echo(f"wrote {path.relative_to(root)}")
