"""The report as an HTML page with matplotlib plots (PNG files next to it) and its JSON."""

from __future__ import annotations
from trainyard import k8s as K

import html
import json
from pathlib import Path
from typing import Sequence

from .report import Report


def _bar_stacked(ax, labels: list[str], series: dict[str, list[float]], title: str, ylabel: str) -> None:
    bottom = [0.0] * len(labels)
    for name, values in series.items():
        ax.bar(labels, values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.legend()
    ax.tick_params(axis="x", labelrotation=30)


def plots(report: Report, out: Path) -> list[str]:
    """PNG files (names relative to `out`): GPUs per node, per rack, queues, quota use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        written.append(name)

    for rows, key, min_width, per_bar in ((report.nodes, "node", 6, 0.8), (report.racks, "rack", 5, 1.2)):
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(max(min_width, len(rows) * per_bar), 4))
        _bar_stacked(ax, [r[key] for r in rows],
                     {"allocated": [r["allocated"] for r in rows],
                      "free (usable)": [r["free"] - r["fragmented"] for r in rows],
                      "free (fragmented)": [r["fragmented"] for r in rows]}, f"GPUs by {key}", "GPUs")
        save(fig, f"gpus_by_{key}.png")
    if report.queues:
        import numpy as np

        labels = [q["queue"] for q in report.queues]
        x = np.arange(len(labels))
        width = 0.27
        fig, ax = plt.subplots(figsize=(max(6, len(labels) * 1.3), 4))
        series = {"allocated": [q["allocated"] or 0 for q in report.queues],
                  "deserved (else weight share)": [q["deserved"] if q["deserved"] is not None else
                                                   (q.get("weight_share") or 0) for q in report.queues],
                  "capability": [q["capability"] or 0 for q in report.queues]}
        for offset, (label, values) in zip((-width, 0, width), series.items()):
            ax.bar(x + offset, values, width, label=label)
        ax.set_xticks(x, labels, rotation=30)
        ax.set_title(f"Queues: {K.GPU_RESOURCE}")
        ax.legend()
        save(fig, "queues.png")
    gpu_quotas = [q for q in report.quotas if "gpu" in q["resource"]]
    if gpu_quotas:
        fig, ax = plt.subplots(figsize=(7, max(2.5, len(gpu_quotas) * 0.5)))
        labels = [f"{q['namespace']}/{q['quota']}" for q in gpu_quotas]
        ax.barh(labels, [q["hard"] for q in gpu_quotas], color="lightgray", label="hard")
        ax.barh(labels, [q["used"] for q in gpu_quotas], label="used")
        ax.set_title("Tenant GPU quota use")
        ax.legend()
        save(fig, "quotas.png")
    return written


def _html_table(rows: list[dict]) -> str:
    if not rows:
        return "<p>none</p>"
    columns = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape('-' if r.get(c) is None else str(r.get(c)))}</td>"
                                    for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_html(report: Report, out: Path, extra_sections: Sequence[tuple[str, list[dict]]] = (),
               extra_images: Sequence[str] = (), extra_json: dict | None = None) -> Path:
    """index.html, report.json and the plots; `extra_*` add what another part of the report computed (the usage
    over a window: its table, plots already written under `out`, and its JSON under its own keys)."""
    out.mkdir(parents=True, exist_ok=True)
    images = [*plots(report, out), *extra_images]
    (out / "report.json").write_text(json.dumps({**report.to_dict(), **(extra_json or {})}, indent=2))
    t = report.totals
    sections = [
        ("GPUs by node", report.nodes), ("GPUs by rack", report.racks), (f"Queues ({K.GPU_RESOURCE})", report.queues),
        ("Pending gangs", report.pending), ("Tenant quotas", report.quotas),
        ("Tenant budgets (GPU-hours)", report.budgets), ("Stalled TrainJobs", report.stalled), *extra_sections]
    body = [f"<h1>trainyard capacity report</h1><p>{t.get('allocatable', 0)} GPUs allocatable, "
            f"{t.get('allocated', 0)} allocated, {t.get('free', 0)} free, {t.get('fragmented', 0)} fragmented "
            f"(free GPUs on nodes that cannot host a full 8-GPU pod), {t.get('nodes', 0)} nodes.</p>"]
    body += [f'<img src="{name}" alt="{name}">' for name in images]
    body += [f"<h2>{html.escape(title)}</h2>{_html_table(rows)}" for title, rows in sections]
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>trainyard capacity report</title>"
            "<style>body{font-family:sans-serif} table{border-collapse:collapse;margin-bottom:1em}"
            "td,th{border:1px solid #ccc;padding:2px 6px} img{max-width:48%;margin:4px}</style></head><body>"
            + "\n".join(body) + "</body></html>")
    path = out / "index.html"
    path.write_text(page)
    return path
