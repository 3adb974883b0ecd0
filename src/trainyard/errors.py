"""trainyard's one exception root and the controller's error family.

Every error a trainyard command can report derives from `TrainyardError`, so a caller that wants
"anything trainyard refused" catches one type. Errors that carry a list of problems (stack config,
catalog) keep them in `.problems` (`trainyard.problems.Problem` records). Types that callers catch as
`ValueError` or `RuntimeError` (the stack parser, the toolchain, the local cluster) still are.

The controller family lives here rather than in `controller/` so the shared Kubernetes helpers
(`trainyard.k8s`, quantity parsing) raise the same `InputError` the controller catches, without an
import cycle; `trainyard.controller.errors` re-exports it.
"""

from __future__ import annotations

from typing import Iterable


class TrainyardError(Exception):
    """The root: something in the inputs (or the machine) that the message tells the user how to fix."""

    problems: tuple = ()


class ProblemsError(TrainyardError):
    """An error carrying every problem found at once; its message renders each of them."""

    def __init__(self, problems: Iterable, heading: str | None = None):
        self.problems = tuple(problems)
        text = "\n".join(str(p) for p in self.problems)
        super().__init__(f"{heading}\n{text}" if heading else text)


# ---- the controller's family: every failure the pure pipeline can detect ---------------------------

class ControllerError(TrainyardError):
    """Something in the inputs prevents building or validating; names the offending field and the fix."""

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
