"""From the runs of a bench to its results document: every figure's values, median and spread, and whether its
target held. Pure: the runner does the running and the writing."""

from __future__ import annotations

import statistics

from trainyard.benchmarks.declarations import Bench, Figure

FORMAT = "trainyard-bench/1"
"""Results files with this `format` were written by `trainyard bench run`; older files are not quoted."""


class FigureMissing(ValueError):
    """A run's JSON lacks a declared figure: the script and the registry disagree."""


def value_at(document: dict, path: str) -> float:
    """The number at dotted `path` of `document` (keys may hold spaces, not dots); a path ending in `#` counts the
    items of the list there (`gang.partial_gangs#`)."""
    count = path.endswith("#")
    node = document
    for part in path.removesuffix("#").split("."):
        if not isinstance(node, dict) or part not in node:
            raise FigureMissing(f"no {path!r} in the run's results (stopped at {part!r})")
        node = node[part]
    if count:
        if not isinstance(node, list):
            raise FigureMissing(f"{path!r} is {node!r}, not a list to count")
        return float(len(node))
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise FigureMissing(f"{path!r} is {node!r}, not a number")
    return float(node)


def figure_summary(figure: Figure, values: list[float]) -> dict:
    median = statistics.median(values)
    summary = {"label": figure.label, "unit": figure.unit, "values": values, "median": median,
               "min": min(values), "max": max(values), "runs": len(values)}
    if figure.target is not None:
        summary["target"] = {"op": figure.target.op, "value": figure.target.value}
        summary["met"] = all(figure.target.met(v) for v in values)
    return summary


def results_document(bench: Bench, runs: list[dict], record: dict, *, quick: bool, exit_codes: list[int],
                     wall_seconds: list[float]) -> dict:
    """The file `trainyard bench run` writes: provenance, figures over the runs, and the runs themselves."""
    figures = {figure.key: figure_summary(figure, [value_at(run["results"], figure.path) for run in runs])
               for figure in bench.figures}
    document = {"format": FORMAT, "bench": bench.name, "measures": bench.measures, **record, "quick": quick,
                "repeats": len(runs), "exit_codes": exit_codes, "wall_seconds": wall_seconds, "figures": figures,
                "targets_met": all(f.get("met", True) for f in figures.values()), "runs": runs}
    if len(runs) == 1 and isinstance(runs[0]["results"].get("summary"), dict):
        document["summary"] = runs[0]["results"]["summary"]  # a bench whose one run summarizes every case
    return document


def missed_targets(document: dict) -> list[str]:
    """One line per figure whose target did not hold in every run."""
    lines = []
    for key, figure in document["figures"].items():
        if not figure.get("met", True):
            target = figure["target"]
            lines.append(f"{document['bench']}.{key} ({figure['label']}): {figure['values']} not {target['op']} "
                         f"{target['value']:g}")
    return lines
