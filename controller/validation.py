"""Building blocks of admission shared by the runtime and TrainJob checks and the plugins' `validate` phase.

`Result` is what admission returns; the helpers build FieldErrors with upstream's wording and read the
replicated jobs of a (loaded) runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from trainyard.k8s import runtime_jobs
from trainyard import k8s as K

from .errors import ControllerError
from .schema import FieldError


@dataclass
class Result:
    """Warnings (admission still passes) and errors (rejected)."""

    warnings: list[str] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.errors

    def message(self) -> str:
        """Errors as the API server aggregates them: one error bare, several in brackets."""
        texts = [str(e) for e in self.errors]
        return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def invalid(path: str, value, message: str) -> FieldError:
    return FieldError(path, "Invalid", message, value)


def forbidden(path: str, message: str) -> FieldError:
    return FieldError(path, "Forbidden", message)


def input_error(err: ControllerError) -> FieldError:
    return FieldError(err.field or "document", "Invalid", err.message)


def strip_dot(error: FieldError) -> FieldError:
    """Schema paths start with '.'; the API server prints them without."""
    field = error.field or ""
    return FieldError(field.lstrip("."), error.kind or "Invalid", error.message.replace(field, field.lstrip(".")),
                      error.value)


def ml_policy(runtime: dict) -> dict:
    """`spec.mlPolicy` of a loaded runtime ({} without one)."""
    return (runtime.get("spec") or {}).get("mlPolicy") or {}


def job_containers(runtime: dict) -> dict[str, set]:
    """Replicated job name -> names of its containers and init containers."""
    return {str(j.get("name")): {c.get("name") for c in K.job_containers(j) + K.job_containers(j, init=True)}
            for j in runtime_jobs(runtime)}


def reserved_env_errors(trainer: dict, reserved: Iterable[str]) -> list[FieldError]:
    """Upstream's one error listing every reserved env var the TrainJob sets."""
    names = [e.get("name") for e in trainer.get("env") or []]
    bad = [n for n in names if n in set(reserved)]
    if not bad:
        return []
    return [invalid("spec.trainer.env", trainer.get("env"),
                    f"must not have reserved envs, invalid envs configured: [{' '.join(bad)}]")]
