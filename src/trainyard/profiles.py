"""Top entries of a sampling profile: py-spy's collapsed stacks (`--format raw`), summed by function.

The benches publish where a controller spends its CPU before and after a change; a flame graph is for
reading, the top of these two lists is what a README table can hold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass


NO_PYTHON_FRAME = "(no Python frame)"


@dataclass(frozen=True)
class ProfileEntry:
    function: str  # py-spy's frame label: "name (module/file.py)" or "name (file.py:line)"
    self_share: float  # of all samples, the share with this function on top of the stack
    total_share: float  # of all samples, the share with this function anywhere on the stack


def parse_collapsed(text: str) -> Counter:
    """Collapsed stacks ("frame;frame;frame count" per line) to a Counter of frame tuples."""
    stacks: Counter = Counter()
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            raise ValueError(f"not a collapsed stack line (\"frames count\"): {line[:80]!r}")
        # py-spy writes a sample caught outside any Python frame as a bare count
        stacks[tuple(stack.split(";")) if stack.strip() else (NO_PYTHON_FRAME,)] += int(count)
    return stacks


def top_entries(stacks: Counter, limit: int = 15, by: str = "self") -> list[ProfileEntry]:
    """The `limit` functions with the largest self (or total) share of samples, largest first."""
    if by not in ("self", "total"):
        raise ValueError(f"by must be 'self' or 'total', not {by!r}")
    samples = sum(stacks.values())
    if not samples:
        return []
    self_counts: Counter = Counter()
    total_counts: Counter = Counter()
    for frames, count in stacks.items():
        self_counts[frames[-1]] += count
        for frame in set(frames):  # a recursive function counts once per sample
            total_counts[frame] += count
    ranked = (self_counts if by == "self" else total_counts).most_common(limit)
    return [ProfileEntry(frame, self_counts[frame] / samples, total_counts[frame] / samples) for frame, _ in ranked]


def top_as_json(stacks: Counter, limit: int = 20) -> dict:
    """`{"by_self": [...], "by_total": [...]}` of the top entries, shares rounded: what a bench writes to its JSON."""
    return {f"by_{by}": [{"function": e.function, "self": round(e.self_share, 4), "total": round(e.total_share, 4)}
                         for e in top_entries(stacks, limit, by)] for by in ("self", "total")}


def format_entries(entries: list[ProfileEntry]) -> str:
    """A fixed-width table: self %, total %, function."""
    lines = [f"{'self %':>7} {'total %':>7}  function"]
    lines += [f"{100 * e.self_share:7.1f} {100 * e.total_share:7.1f}  {e.function}" for e in entries]
    return "\n".join(lines)
