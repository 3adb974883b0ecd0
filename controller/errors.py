"""Errors raised by the pure controller: every failure the pipeline can detect has one of these types.

Callers (reconcile loop, CLI, webhook) only need to catch `ControllerError`; the message is meant for
humans and names the offending field and, where possible, the fix.
"""

from __future__ import annotations


class ControllerError(Exception):
    """Base class: something in the inputs prevents building or validating."""

    def __init__(self, message: str, field: str | None = None):
        self.message = message
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class BuildError(ControllerError):
    """The objects for one reconcile cannot be built (upstream: TrainJobResourcesCreationFailed)."""


class ValidationError(BuildError):
    """A build step found a rule violation that admission would also report."""


class InputError(BuildError):
    """The document is not a well-formed TrainJob / runtime (wrong kind, wrong type of a field)."""


class PreflightError(ControllerError):
    """The built objects would be accepted but could never run here (missing queue, gang beyond a quota)."""
