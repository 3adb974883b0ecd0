"""The one problem record every check reports: what is wrong, where, how to fix it.

`Problem` names the field path, the message, the fix and the severity, and optionally the file (and
line), the catalog release and runtime, and, for admission, the API server's error type and bad value.
It renders in the style of its origin, so messages stay what each command always printed:

- with an API-server error type (`kind`): like the API server's field errors, byte for byte
  (`spec.numNodes: Invalid value: 0: ...`); admission and `trainyard validate` print these;
- with a field but no type: like a stack-config problem (`Pulumi.dev.yaml:12: field: message` + fix);
- without a field: like a catalog finding (`file, runtime r: message` + fix).

`FieldError`, `ConfigProblem` and `Finding` are the constructors (argument order) each caller used
before there was one record; they build a `Problem` and add nothing to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

ERROR = "error"
WARNING = "warning"


class _Missing:
    """No bad value recorded (distinct from a bad value of None)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Problem:
    field: str | None
    message: str
    fix: str | None = None
    severity: str = ERROR
    file: str | None = None
    line: int | None = None
    kind: str | None = None
    """API-server error type: Invalid, Required, Forbidden, Unsupported value, Too many, Too long, ..."""
    value: Any = MISSING
    release: str | None = None
    runtime: str | None = None
    code: str | None = None
    """For schema violations: the OpenAPI keyword that failed (type, enum, minimum, required, unknown...)."""
    expected: Any = None
    """For schema violations: what the keyword asked for (the type, the enum values, the bound)."""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else (self.file or "")

    @property
    def is_warning(self) -> bool:
        return self.severity == WARNING

    def __str__(self) -> str:
        if self.kind is not None:
            return api_message(self)
        text = _located(self) if self.field is None else _config_line(self)
        return f"{text}\n  fix: {self.fix}" if self.fix else text


def api_message(problem: Problem) -> str:
    """As the API server renders a field error (`field.Error.Error()`)."""
    field, kind, message, value = problem.field, problem.kind, problem.message, problem.value
    if kind == "Required":
        return f"{field}: Required value: {message}"
    if kind == "Forbidden":
        return f"{field}: Forbidden: {message}"
    if value is MISSING:
        return f"{field}: {kind}: {message}"
    label = kind if kind and kind.endswith("value") else f"{kind or 'Invalid'} value"
    return f"{field}: {label}: {render_value(value)}: {message}"


def render_value(value: Any) -> str:
    """A bad value as Go's field errors print it."""
    if value is None:
        return '"null"'  # Go renders a nil bad value as the string "null"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return "{...}" if isinstance(value, dict) else "[...]"
    return str(value)


def _config_line(problem: Problem) -> str:
    label = "warning: " if problem.is_warning else ""
    return f"{problem.where}: {label}{problem.field}: {problem.message}"


def _located(problem: Problem) -> str:
    release = f"release {problem.release}" if problem.release and not problem.file else None
    where = [part for part in (problem.file, release) if part]
    if problem.runtime:
        where.append(f"runtime {problem.runtime}")
    return f"{', '.join(where)}: {problem.message}" if where else problem.message


def errors_of(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if not p.is_warning]


def warnings_of(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.is_warning]


# ---- the constructors each caller knows ----------------------------------------------------------

class FieldError(Problem):
    """`FieldError(field, kind, message[, value])`: an admission / schema error, API-server style."""

    def __init__(self, field: str, kind: str, message: str, value: Any = MISSING, **more: Any):
        super().__init__(field=field, message=message, kind=kind, value=value, **more)


class ConfigProblem(Problem):
    """`ConfigProblem(file, field, message, fix[, severity, line])`: a stack-config problem."""

    def __init__(self, file: str, field: str, message: str, fix: str, severity: str = ERROR,
                 line: int | None = None, **more: Any):
        super().__init__(field=field, message=message, fix=fix, severity=severity, file=file, line=line, **more)


class Finding(Problem):
    """`Finding(message, file=, runtime=, release=, fix=, severity=)`: a catalog problem."""

    def __init__(self, message: str, file: str | None = None, runtime: str | None = None,
                 release: str | None = None, fix: str | None = None, severity: str = ERROR, **more: Any):
        more.setdefault("field", None)
        super().__init__(message=message, file=file, runtime=runtime, release=release, fix=fix,
                         severity=severity, **more)
