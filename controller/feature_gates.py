"""Feature gates of the TrainJob controller, with upstream's names and defaults."""

from __future__ import annotations

TRAINJOB_STATUS = "TrainJobStatus"  # alpha upstream: the status server and its pod wiring
KNOWN_FEATURE_GATES = {TRAINJOB_STATUS: False}


def parse_feature_gates(text: str) -> dict[str, bool]:
    """`A=true,B=false` -> {A: True, B: False} over the defaults; unknown names and values are errors."""
    gates = dict(KNOWN_FEATURE_GATES)
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if name not in KNOWN_FEATURE_GATES:
            raise ValueError(f"unknown feature gate {name!r}; known: {', '.join(KNOWN_FEATURE_GATES)}")
        if not sep or value.lower() not in ("true", "false"):
            raise ValueError(f"{item!r}: use {name}=true or {name}=false")
        gates[name] = value.lower() == "true"
    return gates
