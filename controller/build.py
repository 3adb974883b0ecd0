"""`build_objects`: every object ONE reconcile of a TrainJob server-side-applies, as plain dicts.

Pure and deterministic. The registered plugins (`plugins.REGISTRY`) run phase by phase; the result is
ordered by kind: snapshot ConfigMap, Secrets, ConfigMaps, PodGroups, JobSet. Objects that reconcile
would skip are left out: the snapshot and the MPI Secret when they already exist, a PodGroup that exists
while the TrainJob is not suspended, a JobSet that exists and is running. A finished TrainJob or one
managed by another controller (Kueue MultiKueue) gets nothing.
"""

from __future__ import annotations

from types import ModuleType
from typing import Iterable, Sequence

from trainyard import k8s as K
from .errors import BuildError, ControllerError
from .info import new_runtime_info
from .inputs import load_trainjob
from .plugins import REGISTRY, framework, jobset
from .plugins.framework import Context, FluxTemplates, KeyGenerator
from .plugins.framework import StatusServerConfig
from .snapshot import resolve_runtime
from .status import is_finished


def build_objects(trainjob: dict, runtime: dict | None, existing: Iterable[dict] = (),
                  key_generator: KeyGenerator | None = None,
                  status_server: StatusServerConfig | None = None,
                  plugins: Sequence[ModuleType] = REGISTRY, seal_key: bytes | None = None,
                  flux_templates: FluxTemplates | None = None) -> list[dict]:
    """Objects to apply for `trainjob` built from `runtime` (or from its snapshot among `existing`).

    `existing`: objects already in the cluster (what the plugins' `owned_objects` name), and the
    TrainJob's Namespace (its tenant queue and default priority class, see `tenancy.py`).
    `key_generator`: returns (private PEM, authorized_keys line) for the MPI Secret; tests inject one.
    `status_server`: set when the TrainJobStatus feature gate is on (pods then report progress to it).
    `plugins`: the registry; tests pass another.
    `seal_key`: the controller's snapshot seal key (`snapshot_seal.py`); None in the pure tools.
    `flux_templates`: reads upstream's Flux scripts, called only for a Flux TrainJob (the caller owns the I/O:
    `trainyard.toolchain.flux_templates.read_flux_templates`).
    Raises `BuildError` (or its subclasses) with the field and reason when the inputs cannot be built.
    """
    existing = [o for o in existing if isinstance(o, dict)]
    trainjob = load_trainjob(trainjob)
    if not is_managed_by_us(trainjob) or is_finished(trainjob):
        return []
    runtime_obj, snapshot = resolve_runtime(trainjob, runtime, existing, seal_key)
    ctx = Context(key_generator=key_generator, status_server=status_server, flux_templates=flux_templates)
    try:
        info = new_runtime_info(trainjob, runtime_obj, existing)
        for phase in framework.BUILD_PHASES:
            framework.run(plugins, phase, info, ctx)
    except ControllerError:
        raise
    except (TypeError, AttributeError, KeyError, ValueError, IndexError) as err:
        raise BuildError(f"the runtime template is malformed ({type(err).__name__}: {err}); "
                         "check spec.template.spec.replicatedJobs against the JobSet API") from err
    objects = [snapshot] if snapshot else []
    objects += info.secrets + info.config_maps + info.pod_groups
    return objects + ([info.jobset] if info.jobset is not None else [])


def is_managed_by_us(trainjob: dict) -> bool:
    return trainjob["spec"].get("managedBy", K.MANAGED_BY_CONTROLLER) == K.MANAGED_BY_CONTROLLER


may_apply_jobset = jobset.may_apply_jobset

__all__ = ["build_objects", "may_apply_jobset", "is_managed_by_us", "BuildError"]
