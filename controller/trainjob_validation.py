"""Admission of TrainJobs (pure): CRD schema + CEL rules (`api.py`), then upstream's TrainJob webhook.

Core checks here: runtime lookup, initializers, runtimePatches, seed-era podTemplateOverrides, updates
while suspended, the Volcano queue and PriorityClasses; the ML policies' own rules (reserved env, torchtune,
MPI, Flux) come from each registered plugin's `validate` phase; the tenant namespace's queue and granted
priority classes from `tenancy.py`. Anything the build would refuse (elastic metrics, unknown MPI
flavour...) is reported too, by a trial build with the same plugins.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Iterable, Sequence

from trainyard.k8s import CLUSTERTRAININGRUNTIMES, TRAINER_GROUP, TRAININGRUNTIMES, resource_name
from trainyard.k8s import job_pod_spec

from trainyard import k8s as K
from . import constants as C
from . import dra, k8s
from .errors import ControllerError, InputError
from .inputs import load_runtime, load_trainjob, trainjob_schema
from .plugins import REGISTRY, framework
from .plugins.framework import FluxTemplates
from .runtime_validation import DEPRECATION, is_deprecated
from .schema import FieldError, validate
from .tenant_namespace import admission_errors as tenant_namespace_errors
from .tenant_namespace import jobset_annotations
from .validation import Result, forbidden, input_error, invalid, job_containers, runtime_jobs, strip_dot

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate_trainjob(trainjob: dict, runtime: dict | None, old: dict | None = None,
                      cluster_objects: Iterable[dict] = (), plugins: Sequence[ModuleType] = REGISTRY,
                      flux_templates: FluxTemplates | None = None) -> Result:
    """TrainJob admission. `runtime`: the referenced runtime as found in the cluster (None: missing).
    `cluster_objects`: PriorityClasses, Volcano Queues and the TrainJob's JobSet, when known.
    `plugins`: the registry whose `validate` phases and trial build run; tests pass another.
    `flux_templates`: what the trial build of a Flux TrainJob reads its scripts with (see `build_objects`)."""
    result = Result()
    cluster_objects = [o for o in cluster_objects if isinstance(o, dict)]
    try:
        trainjob = load_trainjob(trainjob)
        old_tj = load_trainjob(old) if old is not None else None
    except InputError as err:
        result.errors.append(input_error(err))
        return result
    schema_errors = validate(trainjob_schema(), {k: v for k, v in trainjob.items() if k != "status"}, "",
                             *([{k: v for k, v in old_tj.items() if k != "status"}] if old_tj else []))
    result.errors += [strip_dot(e) for e in schema_errors]
    if trainjob["spec"].get("managedBy", K.MANAGED_BY_CONTROLLER) != K.MANAGED_BY_CONTROLLER:
        return result
    ref = trainjob["spec"]["runtimeRef"]
    kind, group = ref.get("kind"), ref.get("apiGroup")
    if group != K.TRAINER_GROUP or kind not in C.RUNTIME_KINDS:
        result.errors.append(invalid("spec.runtimeRef", ref, f"unsupported runtime: {kind}.{group}"))
        return result
    if runtime is None:
        result.errors.append(_missing_runtime(kind, ref["name"]))
        return result
    try:
        runtime = load_runtime(runtime)
    except InputError as err:
        result.errors.append(invalid("spec.runtimeRef", ref, f"the referenced runtime is malformed: {err}"))
        return result
    if kind == C.CLUSTER_TRAINING_RUNTIME_KIND and is_deprecated(runtime):
        result.warnings.append("Referenced " + DEPRECATION.format(name=k8s.name_of(runtime)))
    result.warnings += _trainer_unreachable_warnings(trainjob, runtime)
    for check in (_initializer_errors, _patch_errors, _override_errors):
        result.errors += check(trainjob, runtime)
    for errors in framework.run(plugins, "validate", trainjob, runtime, old_tj):
        result.errors += errors
    result.errors += _update_errors(trainjob, old_tj, cluster_objects)
    result.errors += _volcano_errors(trainjob, runtime, cluster_objects)
    result.errors += tenant_namespace_errors(trainjob, runtime, cluster_objects, old_tj)
    if not result.errors:
        result.errors += _trial_build_errors(trainjob, runtime, plugins, flux_templates, cluster_objects)
    return result


def _missing_runtime(kind: str, name: str) -> FieldError:
    if kind == C.CLUSTER_TRAINING_RUNTIME_KIND:
        return invalid("spec.RuntimeRef", name, f'{resource_name(CLUSTERTRAININGRUNTIMES, TRAINER_GROUP)} "{name}" not found: '
                        "specified clusterTrainingRuntime must be created before the TrainJob is created")
    return invalid("spec.runtimeRef", name, f'{resource_name(TRAININGRUNTIMES, TRAINER_GROUP)} "{name}" not found: '
                    "specified trainingRuntime must be created before the TrainJob is created")


def _trainer_unreachable_warnings(trainjob: dict, runtime: dict) -> list[str]:
    if trainjob["spec"].get("trainer") is None:
        return []
    job = next((j for j in runtime_jobs(runtime) if K.ancestor_of(j) == C.ANCESTOR_TRAINER), None)
    if job is not None and k8s.find_container(job, C.NODE) is not None:
        return []
    return [f"spec.trainer is ignored: runtime {k8s.name_of(runtime)!r} has no job labelled {K.LABEL_ANCESTOR}: trainer "
            'with a container named "node"; fix the runtime (see the warnings when it is created)']


def _initializer_errors(trainjob: dict, runtime: dict) -> list[FieldError]:
    errors = []
    initializer = trainjob["spec"].get("initializer") or {}
    by_ancestor = {K.ancestor_of(j): j for j in runtime_jobs(runtime) if K.ancestor_of(j)}
    ref = trainjob["spec"]["runtimeRef"]
    for key, name, config in (("dataset", C.DATASET_INITIALIZER, "datasetConfig"), ("model", C.MODEL_INITIALIZER, "modelConfig")):
        if initializer.get(key) is None:
            continue
        job = by_ancestor.get(name)
        if job is None:
            errors.append(invalid("spec.runtimeRef", ref, f"must have {name} job when trainJob is configured with input {config}"))
            continue
        container = k8s.find_container(job, name)
        if container is None:
            errors.append(invalid("spec.runtimeRef", ref, f"must have container with name - {name} in the {name} job"))
        elif not any(m.get("name") == C.INITIALIZER_VOLUME_MOUNT for m in container.get("volumeMounts") or []):
            errors.append(invalid("spec.runtimeRef", ref, f"must have volumeMount with name - {C.INITIALIZER_VOLUME_MOUNT} "
                                   f"in container {name} of the {name} job"))
    return errors


def _container_patch_errors(path: str, value, job_name: str, pod_spec: dict, containers: set) -> list[FieldError]:
    errors = []
    for c in pod_spec.get("initContainers") or []:
        if c.get("name") not in containers:
            errors.append(invalid(path, value, f"must not have initContainer that doesn't exist in the runtime job {job_name}"))
    for c in pod_spec.get("containers") or []:
        if c.get("name") not in containers:
            errors.append(invalid(path, value, f"must not have container that doesn't exist in the runtime job {job_name}"))
        elif c.get("env") and c.get("name") in (C.DATASET_INITIALIZER, C.MODEL_INITIALIZER, C.NODE):
            errors.append(invalid(path, value, f"must not have envs for the {C.DATASET_INITIALIZER}, "
                                   f"{C.MODEL_INITIALIZER}, {C.NODE} containers"))
    return errors


def _is_domain_prefixed_path(value: str) -> list[str]:
    domain, slash, rest = value.partition("/")
    problems = []
    if not slash or not rest:
        problems.append("must be a domain-prefixed path (such as \"acme.io/foo\")")
    if not _DNS1123_SUBDOMAIN.match(domain) or len(domain) > 253:
        problems.append("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                        "'-' or '.', and must start and end with an alphanumeric character")
    if rest and not re.match(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$", rest):
        problems.append("path part is invalid")
    return problems


def _patch_errors(trainjob: dict, runtime: dict) -> list[FieldError]:
    errors = []
    containers = job_containers(runtime)
    for i, patch in enumerate(trainjob["spec"].get("runtimePatches") or []):
        path = f"spec.runtimePatches[{i}]"
        for problem in _is_domain_prefixed_path(str(patch.get("manager", ""))):
            errors.append(invalid(f"{path}.manager", patch.get("manager"), problem))
        jobs = ((((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or [])
        for j, job in enumerate(jobs):
            job_path = f"{path}.trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
            if job.get("name") not in containers:
                errors.append(invalid(job_path, job.get("name"), "must not have replicated job that doesn't exist in the runtime job template"))
                continue
            pod = job_pod_spec(job)
            errors += _container_patch_errors(job_path, job.get("name"), job["name"], pod, containers[job["name"]])
    return errors


def _override_errors(trainjob: dict, runtime: dict) -> list[FieldError]:
    """Seed-era (v2.1) podTemplateOverrides: same rules and messages as v2.1."""
    errors = []
    containers = job_containers(runtime)
    overrides = trainjob["spec"].get("podTemplateOverrides") or []
    path = "spec.podTemplateOverrides"
    for override in overrides:
        for target in override.get("targetJobs") or []:
            if target.get("name") not in containers:
                errors.append(invalid(path, "...", "must not have targetJob that doesn't exist in the runtime job template"))
                continue
            errors += _container_patch_errors(path, "...", target["name"], override.get("spec") or {}, containers[target["name"]])
    if K.LABEL_ANCESTOR in (trainjob["spec"].get("labels") or {}):
        errors.append(invalid(f"spec.labels[{K.LABEL_ANCESTOR}]", trainjob["spec"]["labels"][K.LABEL_ANCESTOR],
                               "must not set the reserved label; it is owned by the runtime"))
    return errors


def _update_errors(trainjob: dict, old: dict | None, cluster_objects: list[dict]) -> list[FieldError]:
    if old is None:
        return []
    errors = []
    path = "spec.runtimePatches"

    def comparable(tj):
        return [{k: v for k, v in p.items() if k != "time"} for p in tj["spec"].get("runtimePatches") or []]

    if comparable(trainjob) != comparable(old):
        if not trainjob["spec"].get("suspend") and not old["spec"].get("suspend"):
            errors.append(forbidden(path, "RuntimePatches can only be modified when the TrainJob is suspended before or after the update"))
        else:
            jobset = k8s.find_object(cluster_objects, "JobSet", k8s.name_of(trainjob), k8s.namespace_of(trainjob))
            for job in ((jobset or {}).get("status") or {}).get("replicatedJobsStatus") or []:
                if job.get("active", 0) > 0:
                    errors.append(forbidden(path, f"RuntimePatches cannot be modified when the JobSet's ReplicatedJob {job.get('name')} is still active"))
    if (trainjob["spec"].get("podTemplateOverrides") or []) != (old["spec"].get("podTemplateOverrides") or []) \
            and not trainjob["spec"].get("suspend"):
        errors.append(forbidden("spec.podTemplateOverrides", "PodTemplateOverrides can only be modified when the TrainJob is suspended"))
    return errors


def _volcano_errors(trainjob: dict, runtime: dict, cluster_objects: list[dict]) -> list[FieldError]:
    if "volcano" not in ((runtime.get("spec") or {}).get("podGroupPolicy") or {}):
        return []
    errors = []
    queue = jobset_annotations(trainjob, runtime).get(K.VOLCANO_QUEUE_ANNOTATION)
    path = f"spec.annotations[{K.VOLCANO_QUEUE_ANNOTATION}]"
    if queue is not None and queue == "":
        errors.append(invalid(path, queue, "Volcano queue name must not be empty"))
    elif queue and k8s.find_object(cluster_objects, "Queue", queue) is None:
        errors.append(invalid(path, queue, f"Volcano queue {queue!r} doesn't exist; create it or pick an existing queue"))
    for job in runtime_jobs(runtime):
        name = (k8s.pod_template(dict(job)).get("spec") or {}).get("priorityClassName")
        if name and name not in C.SYSTEM_PRIORITY_CLASSES and k8s.find_object(cluster_objects, "PriorityClass", name) is None:
            errors.append(invalid("spec.templateSpec.priorityClassName", name,
                                   f'PriorityClass "{name}" doesn\'t exist: priorityclasses.scheduling.k8s.io "{name}" not found'))
    return errors


def _trial_build_errors(trainjob: dict, runtime: dict, plugins: Sequence[ModuleType],
                        flux_templates: FluxTemplates | None, cluster_objects: Sequence[dict] = ()) -> list[FieldError]:
    """A build of the TrainJob on its own, with only the ResourceClaimTemplates it claims from (the GPUs they
    give a node decide numProcPerNode and the MPI slots): what it cannot build, it could never run."""
    from .build import build_objects
    templates = [o for o in cluster_objects if o.get("kind") == dra.TEMPLATE_KIND]
    try:
        build_objects(trainjob, runtime, templates, key_generator=lambda: (b"", b""), plugins=plugins,
                      flux_templates=flux_templates)
    except ControllerError as err:
        return [FieldError(err.field or "spec", "Invalid", err.message)]
    return []
