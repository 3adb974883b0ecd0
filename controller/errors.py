"""Errors raised by the pure controller: every failure the pipeline can detect has one of these types.

Callers (reconcile loop, CLI, webhook) only need to catch `ControllerError`; the message is meant for
humans and names the offending field and, where possible, the fix. The classes are defined once in
`trainyard.errors` (under the common root `TrainyardError`); this module names them for the controller.
"""

from trainyard.errors import BuildError, ControllerError, InputError, PreflightError, ValidationError

__all__ = ["BuildError", "ControllerError", "InputError", "PreflightError", "ValidationError"]
