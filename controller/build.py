"""`build_objects`: every object ONE reconcile of a TrainJob server-side-applies, as plain dicts.

Pure and deterministic. Order: snapshot ConfigMap, Secrets, ConfigMaps, PodGroup, JobSet. Objects that
reconcile would skip are left out: the snapshot and the MPI Secret when they already exist, a PodGroup
that exists while the TrainJob is not suspended, a JobSet that exists and is running. A finished
TrainJob or one managed by another controller (Kueue MultiKueue) gets nothing.
"""

from __future__ import annotations

from typing import Callable, Iterable

from . import constants as C
from . import k8s
from .errors import BuildError, ControllerError
from .info import new_runtime_info
from .inputs import load_trainjob
from .plugins import flux, jobset, mpi, podgroup, simple, tenancy, torch, trainjobstatus
from .plugins.trainjobstatus import StatusServerConfig
from .snapshot import resolve_runtime
from .status import is_finished

KeyGenerator = Callable[[], tuple[bytes, bytes]]


def build_objects(trainjob: dict, runtime: dict | None, existing: Iterable[dict] = (),
                  key_generator: KeyGenerator | None = None,
                  status_server: StatusServerConfig | None = None) -> list[dict]:
    """Objects to apply for `trainjob` built from `runtime` (or from its snapshot among `existing`).

    `existing`: objects already in the cluster (snapshot ConfigMap, MPI Secret, PodGroup, JobSet), and the
    TrainJob's Namespace (its tenant queue and default priority class, see `tenancy.py`).
    `key_generator`: returns (private PEM, authorized_keys line) for the MPI Secret; tests inject one.
    `status_server`: set when the TrainJobStatus feature gate is on (pods then report progress to it).
    Raises `BuildError` (or its subclasses) with the field and reason when the inputs cannot be built.
    """
    existing = [o for o in existing if isinstance(o, dict)]
    trainjob = load_trainjob(trainjob)
    if not is_managed_by_us(trainjob) or is_finished(trainjob):
        return []
    runtime_obj, snapshot = resolve_runtime(trainjob, runtime, existing)
    try:
        return _build(trainjob, runtime_obj, snapshot, existing, key_generator, status_server)
    except ControllerError:
        raise
    except (TypeError, AttributeError, KeyError, ValueError, IndexError) as err:
        raise BuildError(f"the runtime template is malformed ({type(err).__name__}: {err}); "
                         "check spec.template.spec.replicatedJobs against the JobSet API") from err


def _build(trainjob, runtime_obj, snapshot, existing, key_generator, status_server) -> list[dict]:
    info = new_runtime_info(trainjob, runtime_obj, existing, key_generator)
    # EnforceMLPolicy
    torch.enforce(info)
    mpi.enforce(info)
    simple.enforce_plainml(info)
    simple.enforce_jax(info)
    simple.enforce_xgboost(info)
    flux.enforce(info)
    trainjobstatus.enforce(info, status_server)
    tenancy.enforce_priority(info)  # trainyard: TrainJob priority label, namespace default class
    # EnforcePodGroupPolicy
    podgroup.enforce(info)
    # PreBuildSync
    endpoints = jobset.endpoints(info)
    jobset.sync_parallelism(info)
    # Component builders
    mpi.build(info, endpoints, key_generator)
    flux.build(info)
    trainjobstatus.build(info, status_server)
    podgroup.build(info)
    tenancy.default_queue(info)  # trainyard: the namespace's queue when nothing names one
    objects = [snapshot] if snapshot else []
    objects += info.secrets + info.config_maps + info.pod_groups
    existing_jobset = k8s.find_object(existing, "JobSet", info.name, k8s.namespace_of(trainjob))
    if jobset.may_apply_jobset(trainjob, existing_jobset):
        objects.append(jobset.build(info))
    return objects


def is_managed_by_us(trainjob: dict) -> bool:
    return trainjob["spec"].get("managedBy", C.MANAGED_BY_CONTROLLER) == C.MANAGED_BY_CONTROLLER


may_apply_jobset = jobset.may_apply_jobset

__all__ = ["build_objects", "may_apply_jobset", "is_managed_by_us", "BuildError"]
