"""`trainyard usage` output: a table for people, JSON (one object per group) and CSV for the finance sheet."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Iterable

from trainyard.timestamps import duration_short, format_epoch
from trainyard.usage.account import GroupUsage

FORMATS = ("table", "json", "csv")
FIELDS = ("gpu_hours", "gpu_hours_within", "gpu_hours_borrowed", "wait_p50_s", "wait_p95_s", "started", "waiting",
          "completed", "failed")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
LOST_FIELD = "gpu_hours_lost_to_reclaim"


def parse_duration(text: str, option: str = "--since") -> float:
    """Seconds of a duration such as 90m, 36h, 7d, 2w (or several: 1d12h)."""
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ValueError(f"{option} {text!r} is not a duration: write a number and a unit s, m, h, d or w, "
                         f"such as 7d or 36h")
    seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if seconds <= 0:
        raise ValueError(f"{option} {text!r} is empty: give a window longer than 0")
    return seconds


def row(by: str, usage: GroupUsage, since: float, until: float) -> dict:
    values = {name: getattr(usage, name) for name in FIELDS}
    for name in ("gpu_hours", "gpu_hours_within", "gpu_hours_borrowed"):
        values[name] = round(values[name], 4)
    for name in ("wait_p50_s", "wait_p95_s"):
        values[name] = None if values[name] is None else round(values[name], 1)
    lost = usage.gpu_hours_lost_to_reclaim
    values[LOST_FIELD] = None if lost is None else round(lost, 4)
    return {"group": usage.group, "by": by, by: usage.group, **values,
            "since": format_epoch(since), "until": format_epoch(until)}


def to_json(by: str, rows: Iterable[GroupUsage], since: float, until: float, budgets: dict | None = None) -> str:
    """One object per group; a tenant with a budget also has `budget` (this period: gpu_hours, period,
    spent_gpu_hours, percent, state, action, runs_out)."""
    budgets = budgets or {}
    return json.dumps([{**row(by, usage, since, until), **({"budget": budgets[usage.group]}
                                                         if usage.group in budgets else {})} for usage in rows],
                      indent=2)


BUDGET_COLUMNS = ("budget_gpu_hours", "budget_spent_gpu_hours", "budget_state", "budget_runs_out")


def to_csv(by: str, rows: Iterable[GroupUsage], since: float, until: float, budgets: dict | None = None) -> str:
    budgets = budgets or {}
    out = io.StringIO()
    columns = [by, *FIELDS, LOST_FIELD, "since", "until", *(BUDGET_COLUMNS if budgets else ())]
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for usage in rows:
        found = budgets.get(usage.group) or {}
        extra = {"budget_gpu_hours": found.get("gpu_hours"), "budget_spent_gpu_hours": found.get("spent_gpu_hours"),
                 "budget_state": found.get("state"), "budget_runs_out": found.get("runs_out")}
        writer.writerow({k: "" if v is None else v for k, v in {**row(by, usage, since, until), **extra}.items()})
    return out.getvalue()


def to_table(by: str, rows: list[GroupUsage], since: float, until: float, budgets: dict | None = None) -> str:
    header: tuple[str, ...] = (by, "GPU-h", "within", "borrowed", "wait p50", "wait p95", "started", "waiting", "completed", "failed")
    lines: list[tuple[str, ...]] = [(u.group, f"{u.gpu_hours:.2f}", f"{u.gpu_hours_within:.2f}", f"{u.gpu_hours_borrowed:.2f}",
              duration_short(u.wait_p50_s), duration_short(u.wait_p95_s), str(u.started), str(u.waiting), str(u.completed),
              str(u.failed)) for u in rows]
    total = sum(u.gpu_hours for u in rows)
    lines.append(("total", f"{total:.2f}", f"{sum(u.gpu_hours_within for u in rows):.2f}",
                  f"{sum(u.gpu_hours_borrowed for u in rows):.2f}", "", "", *(str(sum(getattr(u, f) for u in rows))
                                                                              for f in FIELDS[5:])))
    if any(u.gpu_hours_lost_to_reclaim for u in rows):  # reclaim threw work away in the window: say how much
        header = (*header, "lost to reclaim")
        lost = [f"{u.gpu_hours_lost_to_reclaim or 0.0:.2f}" for u in rows]
        lost.append(f"{sum(u.gpu_hours_lost_to_reclaim or 0.0 for u in rows):.2f}")  # the total line's
        lines = [(*line, cell) for line, cell in zip(lines, lost)]
    widths = [max(len(line[i]) for line in (header, *lines)) for i in range(len(header))]
    text = [f"GPU usage by {by}, {format_epoch(since)} to {format_epoch(until)}"]
    for line in (header, *lines):
        text.append("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths))))
    if budgets:
        text += ["", "Budgets this period"]
        for tenant, b in sorted(budgets.items()):
            out = f"runs out {b['runs_out']}" if b["runs_out"] else "lasts the period at this pace"
            text.append(f"  {tenant}: {b['spent_gpu_hours']:.2f} of {b['gpu_hours']:g} GPU-h {b['period']} "
                        f"({b['percent']:.0f} %, {b['state']}); {out}; at 100 %: {b['action']}")
    return "\n".join(text)


def render(output: str, by: str, rows: list[GroupUsage], since: float, until: float,
           budgets: dict | None = None) -> str:
    return {"json": to_json, "csv": to_csv, "table": to_table}[output](by, rows, since, until, budgets)


def fairness_title(fairness: dict) -> str:
    if not fairness.get("saturated_s"):
        return "Fairness: the cluster was never saturated in the window (demand below capacity): nothing to audit"
    jain = fairness.get("jain_index")
    return (f"Fairness while saturated ({fairness['saturated_s'] / 60:.0f} min; allocation "
            f"{100 * (fairness.get('allocation') or 0):.1f} %; Jain's index {'-' if jain is None else f'{jain:.3f}'})")


def fairness_text(fairness: dict) -> str:
    """The audit's tenants: entitlement (weight share, fair share) against the share received, and starvation."""
    lines = [fairness_title(fairness)]
    if not fairness.get("saturated_s"):
        return lines[0]
    header = ("tenant", "weight share", "fair share", "received", "points", "starved", "longest starvation")
    rows: list[tuple[str, ...]] = [header]
    for name, t in sorted(fairness["tenants"].items()):
        longest = max((s["to_s"] - s["from_s"] for s in t["starvation"]), default=0.0)
        rows.append((name, _percent(t["weight_share"]), _percent(t["fair_share"]), _percent(t["share"]),
                     "-" if t["deviation_points"] is None else f"{t['deviation_points']:+.1f}",
                     duration_short(t["starved_s"]) if t["starved_s"] else "0", duration_short(longest) if longest else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"
