"""Stack-config problems: each names the stack file (and line), the field path and the fix, all reported at once.

Warnings (e.g. quotas that oversubscribe the declared cluster) are reported but never stop a deploy;
errors stop it before anything is registered. The record is the shared `trainyard.problems.Problem`
(`ConfigProblem(file, field, message, fix, severity, line)` builds one).
"""

from __future__ import annotations

from trainyard.errors import ProblemsError
from trainyard.problems import ERROR, WARNING, ConfigProblem, Problem, errors_of, warnings_of

__all__ = ["ERROR", "WARNING", "ConfigProblem", "Problem", "StackConfigError", "errors_of", "warnings_of"]


class StackConfigError(ProblemsError, ValueError):
    """Raised before any resource is registered, so a bad stack file never half-applies."""

    def __init__(self, problems: list[Problem]):
        count = len(problems)
        super().__init__(problems, f"{count} problem{'s' if count != 1 else ''} in the stack configuration:")
