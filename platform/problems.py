"""Stack-config problems: each names the stack file, the field path and the fix, all reported at once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigProblem:
    file: str
    field: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}\n  fix: {self.fix}"


class StackConfigError(ValueError):
    """Raised before any resource is registered, so a bad stack file never half-applies."""

    def __init__(self, problems: list[ConfigProblem]):
        self.problems = tuple(problems)
        count = len(self.problems)
        super().__init__(f"{count} problem{'s' if count != 1 else ''} in the stack configuration:\n"
                         + "\n".join(str(p) for p in self.problems))
