"""Dataclass field metadata that maps a stack-config field to its key, shared by every shape a stack holds.

The scheduling shapes (`trainyard.queues`) and the platform's stack model (`trainyard.platform.stack_model`)
both mark their fields; the platform's parser (`platform/stack_fields.py`) reads the marks. Kept in the ground
so `queues/` needs nothing from `platform/`.
"""

from __future__ import annotations

STACK_KEY = "stack_key"
DERIVED = {STACK_KEY: None}
"""A value the program fills in itself (ports, the file name, the GPU resource name) that no stack sets."""


def stack_key(name: str) -> dict:
    """Field metadata for a key whose name is not the camelCase of the field's."""
    return {STACK_KEY: name}


DEFAULT_TEXT = "default_text"
"""The default of a key that has no single value in the model (the parser derives it), in words for the reference."""


def described_default(text: str) -> dict:
    """Field metadata for a key whose default the parser derives from other keys (`docs/reference/stack.md`)."""
    return {DEFAULT_TEXT: text}
