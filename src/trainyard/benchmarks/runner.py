"""Runs a bench's script once per repeat, each into its own scratch directory, and writes the results document
(`bench/results/<name>.json` for full runs). The thin I/O around `aggregate`."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from trainyard.benchkit import finish_record, run_record
from trainyard.benchmarks.aggregate import FigureMissing, results_document
from trainyard.benchmarks.declarations import Bench


def script_command(bench: Bench, repeat: int, out_dir: Path, *, quick: bool, python: str = sys.executable) -> list[str]:
    args = bench.quick_args if quick else bench.args
    if args is None:
        raise ValueError(f"bench {bench.name} has no reduced run")
    seed = str(bench.seeds[repeat % len(bench.seeds)]) if bench.seeds else str(repeat)
    repeat_args = [a.replace("{repeat}", str(repeat)).replace("{seed}", seed) for a in bench.repeat_args]
    return [python, bench.script, *args, *repeat_args, "--out", str(out_dir)]


def run_bench(bench: Bench, root: Path, results_dir: Path, *, repeats: int | None = None, quick: bool = False,
              argv: list[str] | None = None, echo: Callable[[str], None] = print) -> dict:
    """Runs the repeats, writes `results_dir/<name>.json` and returns its document."""
    count = repeats or (1 if quick else bench.repeats)
    record = run_record(argv or ["trainyard", "bench", "run", bench.name])
    runs, codes, walls = [], [], []
    started = time.monotonic()
    for repeat in range(count):
        with tempfile.TemporaryDirectory(prefix=f"bench-{bench.name}-") as scratch:
            command = script_command(bench, repeat, Path(scratch), quick=quick)
            echo(f"[bench {bench.name}] run {repeat + 1}/{count}: {' '.join(command[1:])}")
            run_started = time.monotonic()
            code = subprocess.run(command, cwd=root).returncode
            walls.append(round(time.monotonic() - run_started, 1))
            output = Path(scratch) / bench.output_file
            if not output.exists():
                raise RuntimeError(f"bench {bench.name}: run {repeat + 1} exited {code} and wrote no {bench.output_file}")
            runs.append(json.loads(output.read_text()))
            codes.append(code)
        elapsed = time.monotonic() - started
        left = elapsed / (repeat + 1) * (count - repeat - 1)
        echo(f"[bench {bench.name}] run {repeat + 1}/{count} done in {walls[-1]:.0f} s (exit {code}); "
             f"{elapsed / 60:.1f} min so far, about {left / 60:.1f} min left")
    record["script_command"] = " ".join(script_command(bench, 0, Path("DIR"), quick=quick, python="python")[1:])
    results_dir.mkdir(parents=True, exist_ok=True)
    try:
        document = results_document(bench, runs, finish_record(record), quick=quick, exit_codes=codes,
                                     wall_seconds=walls)
    except FigureMissing as exc:  # keep what the runs wrote: a long run is not lost to a registry mismatch
        kept = results_dir / f"{bench.name}.runs-without-figures.json"
        kept.write_text(json.dumps({**record, "exit_codes": codes, "wall_seconds": walls, "runs": runs}, indent=1)
                        + "\n")
        raise FigureMissing(f"{exc}; the runs are kept in {kept}") from exc
    (results_dir / f"{bench.name}.json").write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    return document
