"""The plugin protocol (upstream `pkg/runtime/framework`, as module-level functions).

A plugin is a module registered in `plugins.REGISTRY`. It defines any of the phases below, each with
exactly the signature in `PHASES`, so `build.py`, admission and reconcile can loop over the registry
without knowing which plugin does what. Phases run one after the other, each over the whole registry
in registry order:

- `validate(trainjob, runtime, old) -> list[FieldError]`: admission rules of the policy (CustomValidation);
- `enforce_ml_policy(info, ctx)`: env, counts, volumes of the ML policy (EnforceMLPolicy);
- `enforce_pod_group_policy(info, ctx)`: gang labels/annotations, priority (EnforcePodGroupPolicy);
- `pre_build(info, ctx)`: pod counts are final here; endpoints go to `ctx.endpoints` (PodNetwork);
- `build(info, ctx)`: append objects to `info.secrets`/`config_maps`/`pod_groups` or set `info.jobset`
  (ComponentBuilder); objects are applied in that kind order, whatever the plugin order;
- `owned_objects(trainjob, runtime) -> list[ObjectRef]`: what an earlier reconcile may have created
  that the next build must see (to keep an immutable Secret, not re-apply a PodGroup or a running
  JobSet); reconcile reads exactly these back (WatchExtension's role). `runtime` is the raw runtime
  document the build will use (unvalidated: read it defensively).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol

if TYPE_CHECKING:  # only for the phase protocols' signatures: info.py does not import the plugins
    from ..info import RuntimeInfo
    from ..schema import FieldError

KeyGenerator = Callable[[], tuple[bytes, bytes]]
FluxTemplates = Callable[[], Mapping[str, str]]
"""Reads upstream's Flux script templates, file name -> text; OSError when they are not installed."""

PHASES: dict[str, tuple[str, ...]] = {
    "validate": ("trainjob", "runtime", "old"),
    "enforce_ml_policy": ("info", "ctx"),
    "enforce_pod_group_policy": ("info", "ctx"),
    "pre_build": ("info", "ctx"),
    "build": ("info", "ctx"),
    "owned_objects": ("trainjob", "runtime"),
}
BUILD_PHASES = ("enforce_ml_policy", "enforce_pod_group_policy", "pre_build", "build")


@dataclass(frozen=True)
class StatusServerConfig:
    """Where pods reach the status server (`https://host:port`) and the CA that signed its certificate."""

    base_url: str
    ca_pem: str


@dataclass
class Context:
    """What one build shares beyond the RuntimeInfo: its I/O-free inputs and the endpoints pre_build found."""

    key_generator: KeyGenerator | None = None  # (private PEM, authorized_keys line) for the MPI Secret
    status_server: StatusServerConfig | None = None  # set when the TrainJobStatus feature gate is on
    endpoints: dict[str, list[str]] = field(default_factory=dict)  # pod set -> pod hostnames
    flux_templates: FluxTemplates | None = None  # reads upstream's Flux scripts (file name -> text), for Flux jobs


@dataclass(frozen=True)
class ObjectRef:
    """One object in the TrainJob's namespace, as reconcile GETs it."""

    api_version: str
    kind: str
    name: str


class Validates(Protocol):
    """A plugin with admission rules (upstream's CustomValidation)."""

    def validate(self, trainjob: dict, runtime: dict, old: dict | None) -> list[FieldError]: ...


class EnforcesMLPolicy(Protocol):
    def enforce_ml_policy(self, info: RuntimeInfo, ctx: Context) -> None: ...


class EnforcesPodGroupPolicy(Protocol):
    def enforce_pod_group_policy(self, info: RuntimeInfo, ctx: Context) -> None: ...


class PreBuilds(Protocol):
    def pre_build(self, info: RuntimeInfo, ctx: Context) -> None: ...


class Builds(Protocol):
    def build(self, info: RuntimeInfo, ctx: Context) -> None: ...


class OwnsObjects(Protocol):
    def owned_objects(self, trainjob: dict, runtime: dict) -> list[ObjectRef]: ...


def phases_of(plugin: ModuleType) -> list[str]:
    return [phase for phase in PHASES if callable(getattr(plugin, phase, None))]


def run(plugins: Iterable[ModuleType], phase: str, *args) -> list:
    """Call `phase` on every plugin defining it, in order; the results in a list (None for None-returning phases)."""
    return [getattr(plugin, phase)(*args) for plugin in plugins if callable(getattr(plugin, phase, None))]


def plugin_name(plugin: ModuleType) -> str:
    return plugin.__name__.rpartition(".")[2]
