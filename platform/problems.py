"""Stack-config problems: each names the stack file (and line), the field path and the fix, all reported at once.

Warnings (e.g. quotas that oversubscribe the declared cluster) are reported but never stop a deploy;
errors stop it before anything is registered.
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class ConfigProblem:
    file: str
    field: str
    message: str
    fix: str
    severity: str = ERROR
    line: int | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        label = "warning: " if self.severity == WARNING else ""
        return f"{self.where}: {label}{self.field}: {self.message}\n  fix: {self.fix}"


def errors_of(problems: list[ConfigProblem]) -> list[ConfigProblem]:
    return [p for p in problems if p.severity != WARNING]


def warnings_of(problems: list[ConfigProblem]) -> list[ConfigProblem]:
    return [p for p in problems if p.severity == WARNING]


class StackConfigError(ValueError):
    """Raised before any resource is registered, so a bad stack file never half-applies."""

    def __init__(self, problems: list[ConfigProblem]):
        self.problems = tuple(problems)
        count = len(self.problems)
        super().__init__(f"{count} problem{'s' if count != 1 else ''} in the stack configuration:\n"
                         + "\n".join(str(p) for p in self.problems))
