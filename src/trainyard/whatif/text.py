"""The what-if as terminal text: what changed, the side-by-side table, the jobs only one side could run (pure)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from trainyard.whatif.compare import never_runnable_lines, table_rows
from trainyard.whatif.limits import why_unchanged


def render(result: Mapping[str, Mapping[str, Any]], changes: Sequence[str]) -> str:
    from rich.console import Console
    from rich.table import Table

    current, proposed = result["current"], result["proposed"]
    workload = current["workload"]
    lines = [f"what-if: {current['stack']} -> {proposed['stack']}",
             f"workload: {workload['source']} ({workload['jobs']} jobs, seed {workload['seed']}), replayed on "
             f"{engine_words(current.get('engine') or {}, current.get('ensemble'))}"]
    lines += ["scheduling changes:", *(f"  {c}" for c in changes)] if changes else ["no scheduling setting changes"]
    rows = table_rows(result)
    table = Table(title_justify="left")
    for index, column in enumerate(rows[0]):
        table.add_column(column, justify="left" if index == 0 else "right")
    for row in rows[1:]:
        table.add_row(*row)
    console = Console(width=120, record=True, force_terminal=False, color_system=None)
    with console.capture() as capture:
        console.print(table)
    lines.append(capture.get().rstrip("\n"))
    lines += why_unchanged(result)
    lines += never_runnable_lines(result)
    for side in ("current", "proposed"):
        for note in result[side]["not_modelled"]:
            lines.append(f"not modelled ({side}): {note}")
        unfinished = result[side].get("unfinished") or []
        if unfinished:
            lines.append(f"unfinished ({side}): {len(unfinished)} jobs still waiting when the replay gave up "
                         f"({', '.join(unfinished[:5])}{', ...' if len(unfinished) > 5 else ''}); their waits are not counted")
    lines += caveats(result, changes)
    if any(result[side]["not_modelled"] for side in ("current", "proposed")):
        lines.append("what the model leaves out (above) can move these figures by many points where it shows no "
                     "change (a profile's preempt and reclaim evict running work on the real scheduler): replay the "
                     "change on the real engine with --engine cluster")
    for note in (current.get("engine") or {}).get("notes", []):
        lines.append(f"cluster engine: {note}")
    return "\n".join(lines) + "\n"


QUEUE_ORDER_SETTINGS = (".queue.weight:", ".queue.deserved.", "scheduler.queuePlugin:")
"""Changes that move only the order in which queues are served, where the model is known to overstate effects."""


def caveats(result: Mapping[str, Mapping[str, Any]], changes: Sequence[str]) -> list[str]:
    """The model's known limits that apply to these changes (none when the cluster engine produced the figures)."""
    if (result["current"].get("engine") or {}).get("name", "model") != "model":
        return []
    return queue_order_caveat(changes)


def queue_order_caveat(changes: Sequence[str]) -> list[str]:
    """The model's known limit on queue-order changes (the whatif_agreement bench: on every trace seed it predicted
    the favoured queue gaining share where the real vc-scheduler moved no more than its run-to-run spread; its
    deserved and dominant shares follow vc-scheduler's log, so the difference lies in the timing of races)."""
    if not any(marker in change for change in changes for marker in QUEUE_ORDER_SETTINGS):
        return []
    return ["queue order (weight, deserved, queue plugin): the model shares GPUs out as vc-scheduler does, but which "
            "waiting job takes GPUs that free up often turns on sub-second timing it does not reproduce, and it has "
            "shown gains for the favoured queue that the real scheduler did not give; confirm with --engine cluster"]


def engine_words(engine: Mapping[str, Any], ensemble: Mapping[str, Any] | None = None) -> str:
    """What produced the figures: the model (default; the mean of its ensemble of replays) or a cluster of the
    stack's shape."""
    if engine.get("name") == "cluster":
        return (f"a local cluster per side (real vc-scheduler, JobSet and trainyard controllers, "
                f"{engine.get('speedup', 1):g}x time)")
    described = ensemble or {}
    if described.get("members", 1) > 1:
        return (f"trainyard's model of vc-scheduler (mean of {described['members']} replays, each job up to "
                f"{described['start_jitter_s']:g}s later)")
    return "trainyard's model of vc-scheduler"
