"""The preflight's findings as an operator reads them (pure)."""

from __future__ import annotations

from typing import Sequence

from trainyard.upgrade.verdicts import BLOCKING, FINISHED, UNCHANGED, JobFinding, summary

SHOWN_DIFFERENCES = 6
REFUSAL_CHARS = 400
"""JobSet's refusal quotes the whole replicatedJobs list: the text keeps its start and its end (--json has it all)."""


def shortened(message: str) -> str:
    if len(message) <= REFUSAL_CHARS:
        return message
    half = REFUSAL_CHARS // 2
    return f"{message[:half]} ... {message[-half:]}"


def render(findings: Sequence[JobFinding]) -> str:
    counted = summary(list(findings))
    finished = sum(1 for f in findings if f.state == FINISHED)
    lines = [f"{counted['trainjobs']} TrainJobs" + (f" ({finished} finished)" if finished else "") + ": "
             + (", ".join(f"{n} {v}" for v, n in counted["verdicts"].items()) or "none")]
    notable = [f for f in findings if f.state != FINISHED]
    if notable:
        width = max(len(f"{f.namespace}/{f.name}") for f in notable)
        lines.append("")
        lines.append(f"{'TRAINJOB':<{width}}  {'STATE':<11}  {'VERDICT':<31}  RUNTIME")
        for f in notable:
            runtime = f.runtime + (" (snapshot)" if f.snapshot else "")
            lines.append(f"{f.namespace + '/' + f.name:<{width}}  {f.state:<11}  {f.verdict:<31}  {runtime}")
    for f in notable:
        if f.verdict == UNCHANGED or not (f.differences or f.refusal or f.action):
            continue
        lines.append("")
        lines.append(f"{f.namespace}/{f.name}: {f.verdict}")
        for path in f.differences[:SHOWN_DIFFERENCES]:
            lines.append(f"  differs: {path}")
        if len(f.differences) > SHOWN_DIFFERENCES:
            lines.append(f"  differs: ... {len(f.differences) - SHOWN_DIFFERENCES} more (--json lists them)")
        if f.refusal:
            lines.append(f"  the API server: {shortened(f.refusal)}")
        if f.action:
            lines.append(f"  do: {f.action}")
    lines.append("")
    blocking = counted["blocking"]
    lines.append(f"{blocking} TrainJob{'s need' if blocking != 1 else ' needs'} the operator before the upgrade "
                 f"({' or '.join(BLOCKING)})" if blocking else "nothing blocks the upgrade")
    return "\n".join(lines) + "\n"
