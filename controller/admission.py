"""Admission (pure): the checks the API server + trainer webhooks apply to runtimes and TrainJobs.

`validate_runtime` / `validate_trainjob` return a `Result` of warnings and field errors with upstream's
messages: CRD schema + CEL rules (from `api.py`), the runtime webhook (ancestor replicas, required
containers, deprecation), and the TrainJob webhook (runtime lookup, initializers, runtimePatches,
seed-era podTemplateOverrides, reserved env per ML policy, Volcano queue / PriorityClass) and the tenant
namespace's queue and granted priority classes (`tenancy.py`). Anything
the build would refuse (elastic metrics, unknown MPI flavour...) is reported too, by a trial build.

Beyond upstream: a runtime whose trainer job lacks the Job-level ancestor label, or has no container
named `node`, still builds as upstream would, but admission WARNS and names the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from . import constants as C
from . import k8s
from .errors import ControllerError, InputError
from .info import new_runtime_info
from .inputs import load_runtime, load_trainjob, normalize, runtime_schema, trainjob_schema
from .plugins import flux, torchtune
from .plugins.common import runtime_node_resources
from .tenancy import admission_errors as tenant_errors
from .tenancy import admission_lookups, jobset_annotations
from .resources import gpu_count
from .schema import FieldError, validate

DEPRECATION = ('ClusterTrainingRuntime "{name}" is deprecated and will be removed in a future release of Kubeflow '
               'Trainer. See runtime deprecation policy: '
               'https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy')
_ANCESTOR_CONTAINER = {C.ANCESTOR_TRAINER: C.NODE, C.DATASET_INITIALIZER: C.DATASET_INITIALIZER,
                       C.MODEL_INITIALIZER: C.MODEL_INITIALIZER}
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


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


def _invalid(path: str, value, message: str) -> FieldError:
    return FieldError(path, "Invalid", message, value)


def _forbidden(path: str, message: str) -> FieldError:
    return FieldError(path, "Forbidden", message)


def _input_error(err: ControllerError) -> FieldError:
    return FieldError(err.field or "document", "Invalid", err.message)


# ---- runtimes -----------------------------------------------------------------------------------

def validate_runtime(runtime: dict, old: dict | None = None) -> Result:
    """TrainingRuntime / ClusterTrainingRuntime admission (create when `old` is None, else update)."""
    result = Result()
    try:
        runtime = load_runtime(runtime)
        old_rt = load_runtime(old) if old is not None else None
    except InputError as err:
        result.errors.append(_input_error(err))
        return result
    result.errors += [_strip(e) for e in validate(runtime_schema(), runtime, "", *( [old_rt] if old_rt else []))]
    kind = runtime["kind"]
    webhook_on = (runtime["metadata"].get("labels") or {}).get(C.LABEL_WEBHOOK_VALIDATION) != "disabled"
    if webhook_on and (kind == C.CLUSTER_TRAINING_RUNTIME_KIND or old is None):
        result.errors += replicated_job_errors(runtime)
    if kind == C.CLUSTER_TRAINING_RUNTIME_KIND and old is None and is_deprecated(runtime):
        result.warnings.append(DEPRECATION.format(name=k8s.name_of(runtime)))
    result.warnings += trainer_job_warnings(runtime)
    return result


def _strip(error: FieldError) -> FieldError:
    """Schema paths start with '.'; the API server prints them without."""
    return FieldError(error.field.lstrip("."), error.kind, error.message.replace(error.field, error.field.lstrip(".")),
                      error.value)


def is_deprecated(runtime: dict) -> bool:
    return ((runtime.get("metadata") or {}).get("labels") or {}).get(C.LABEL_SUPPORT) == C.SUPPORT_DEPRECATED


def _jobs(runtime: dict) -> list[dict]:
    jobs = k8s.mapping(k8s.mapping(k8s.mapping(runtime.get("spec")).get("template")).get("spec")).get("replicatedJobs")
    return [j for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []


def replicated_job_errors(runtime: dict) -> list[FieldError]:
    errors = []
    base = "spec.template.spec.replicatedJobs"
    for i, job in enumerate(_jobs(runtime)):
        ancestor = k8s.ancestor_of(job)
        if ancestor not in _ANCESTOR_CONTAINER:
            continue
        if job.get("replicas", 1) != 1:
            errors.append(_invalid(f"{base}[{i}].replicas", job.get("replicas"), "always must be 1"))
        names = [c.get("name") for c in k8s.containers(job)]
        if _ANCESTOR_CONTAINER[ancestor] not in names:
            errors.append(_invalid(f"{base}[{i}].template.spec.template.spec.containers", names,
                                   f"must contain the required container for the ancestor: {ancestor}"))
    return errors


def trainer_job_warnings(runtime: dict) -> list[str]:
    """Beyond upstream: say how to fix a runtime whose trainer job TrainJob fields cannot reach."""
    jobs = _jobs(runtime)
    base = "spec.template.spec.replicatedJobs"
    trainer = next(((i, j) for i, j in enumerate(jobs) if k8s.ancestor_of(j) == C.ANCESTOR_TRAINER), None)
    if trainer is None:
        guess = next(((i, j) for i, j in enumerate(jobs) if j.get("name") in (C.NODE, C.LAUNCHER)), None)
        if guess is None and len(jobs) == 1:
            guess = (0, jobs[0])
        if guess is None:
            return []
        i, job = guess
        where = ""
        pod_labels = ((k8s.pod_template(dict(job)).get("metadata") or {}).get("labels") or {})
        if pod_labels.get(C.LABEL_ANCESTOR):
            where = " (it is on the pod template; the Job template is where it is read)"
        return [f'replicatedJob "{job.get("name")}" has no Job-level label {C.LABEL_ANCESTOR}: trainer{where}, so '
                f"TrainJob trainer settings (image, command, numNodes, env, resourcesPerNode) will not reach it; add it "
                f"under {base}[{i}].template.metadata.labels"]
    i, job = trainer
    names = [c.get("name") for c in k8s.containers(job)]
    if C.NODE in names:
        return []
    return [f'the trainer job "{job.get("name")}" has no container named "node" (containers: {", ".join(map(str, names))}), '
            f"so TrainJob trainer settings and the ML policy env will not reach it; rename the training container to "
            f'"node" in {base}[{i}].template.spec.template.spec.containers']


# ---- TrainJobs ----------------------------------------------------------------------------------

def validate_trainjob(trainjob: dict, runtime: dict | None, old: dict | None = None,
                      cluster_objects: Iterable[dict] = ()) -> Result:
    """TrainJob admission. `runtime`: the referenced runtime as found in the cluster (None: missing).
    `cluster_objects`: PriorityClasses, Volcano Queues and the TrainJob's JobSet, when known."""
    result = Result()
    cluster_objects = [o for o in cluster_objects if isinstance(o, dict)]
    try:
        trainjob = load_trainjob(trainjob)
        old_tj = load_trainjob(old) if old is not None else None
    except InputError as err:
        result.errors.append(_input_error(err))
        return result
    schema_errors = validate(trainjob_schema(), {k: v for k, v in trainjob.items() if k != "status"}, "",
                             *([{k: v for k, v in old_tj.items() if k != "status"}] if old_tj else []))
    result.errors += [_strip(e) for e in schema_errors]
    if trainjob["spec"].get("managedBy", C.MANAGED_BY_CONTROLLER) != C.MANAGED_BY_CONTROLLER:
        return result
    ref = trainjob["spec"]["runtimeRef"]
    kind, group = ref.get("kind"), ref.get("apiGroup")
    if group != C.GROUP or kind not in C.RUNTIME_KINDS:
        result.errors.append(_invalid("spec.runtimeRef", ref, f"unsupported runtime: {kind}.{group}"))
        return result
    if runtime is None:
        result.errors.append(_missing_runtime(kind, ref["name"]))
        return result
    try:
        runtime = load_runtime(runtime)
    except InputError as err:
        result.errors.append(_invalid("spec.runtimeRef", ref, f"the referenced runtime is malformed: {err}"))
        return result
    if kind == C.CLUSTER_TRAINING_RUNTIME_KIND and is_deprecated(runtime):
        result.warnings.append("Referenced " + DEPRECATION.format(name=k8s.name_of(runtime)))
    result.warnings += _trainer_unreachable_warnings(trainjob, runtime)
    for check in (_initializer_errors, _patch_errors, _override_errors, _ml_policy_errors):
        result.errors += check(trainjob, runtime)
    result.errors += _update_errors(trainjob, old_tj, cluster_objects)
    result.errors += _volcano_errors(trainjob, runtime, cluster_objects)
    result.errors += tenant_errors(trainjob, runtime, cluster_objects, old_tj)
    if not result.errors:
        result.errors += _trial_build_errors(trainjob, runtime)
    return result


def _missing_runtime(kind: str, name: str) -> FieldError:
    if kind == C.CLUSTER_TRAINING_RUNTIME_KIND:
        return _invalid("spec.RuntimeRef", name, f'clustertrainingruntimes.trainer.kubeflow.org "{name}" not found: '
                        "specified clusterTrainingRuntime must be created before the TrainJob is created")
    return _invalid("spec.runtimeRef", name, f'trainingruntimes.trainer.kubeflow.org "{name}" not found: '
                    "specified trainingRuntime must be created before the TrainJob is created")


def _trainer_unreachable_warnings(trainjob: dict, runtime: dict) -> list[str]:
    if trainjob["spec"].get("trainer") is None:
        return []
    job = next((j for j in _jobs(runtime) if k8s.ancestor_of(j) == C.ANCESTOR_TRAINER), None)
    if job is not None and k8s.find_container(job, C.NODE) is not None:
        return []
    return [f"spec.trainer is ignored: runtime {k8s.name_of(runtime)!r} has no job labelled {C.LABEL_ANCESTOR}: trainer "
            'with a container named "node"; fix the runtime (see the warnings when it is created)']


def _job_containers(runtime: dict) -> dict[str, set]:
    return {j.get("name"): {c.get("name") for c in k8s.containers(j) + k8s.containers(j, init=True)} for j in _jobs(runtime)}


def _initializer_errors(trainjob: dict, runtime: dict) -> list[FieldError]:
    errors = []
    initializer = trainjob["spec"].get("initializer") or {}
    by_ancestor = {k8s.ancestor_of(j): j for j in _jobs(runtime) if k8s.ancestor_of(j)}
    ref = trainjob["spec"]["runtimeRef"]
    for key, name, config in (("dataset", C.DATASET_INITIALIZER, "datasetConfig"), ("model", C.MODEL_INITIALIZER, "modelConfig")):
        if initializer.get(key) is None:
            continue
        job = by_ancestor.get(name)
        if job is None:
            errors.append(_invalid("spec.runtimeRef", ref, f"must have {name} job when trainJob is configured with input {config}"))
            continue
        container = k8s.find_container(job, name)
        if container is None:
            errors.append(_invalid("spec.runtimeRef", ref, f"must have container with name - {name} in the {name} job"))
        elif not any(m.get("name") == C.INITIALIZER_VOLUME_MOUNT for m in container.get("volumeMounts") or []):
            errors.append(_invalid("spec.runtimeRef", ref, f"must have volumeMount with name - {C.INITIALIZER_VOLUME_MOUNT} "
                                   f"in container {name} of the {name} job"))
    return errors


def _container_patch_errors(path: str, value, job_name: str, pod_spec: dict, containers: set) -> list[FieldError]:
    errors = []
    for c in pod_spec.get("initContainers") or []:
        if c.get("name") not in containers:
            errors.append(_invalid(path, value, f"must not have initContainer that doesn't exist in the runtime job {job_name}"))
    for c in pod_spec.get("containers") or []:
        if c.get("name") not in containers:
            errors.append(_invalid(path, value, f"must not have container that doesn't exist in the runtime job {job_name}"))
        elif c.get("env") and c.get("name") in (C.DATASET_INITIALIZER, C.MODEL_INITIALIZER, C.NODE):
            errors.append(_invalid(path, value, f"must not have envs for the {C.DATASET_INITIALIZER}, "
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
    containers = _job_containers(runtime)
    for i, patch in enumerate(trainjob["spec"].get("runtimePatches") or []):
        path = f"spec.runtimePatches[{i}]"
        for problem in _is_domain_prefixed_path(str(patch.get("manager", ""))):
            errors.append(_invalid(f"{path}.manager", patch.get("manager"), problem))
        jobs = ((((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or [])
        for j, job in enumerate(jobs):
            job_path = f"{path}.trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
            if job.get("name") not in containers:
                errors.append(_invalid(job_path, job.get("name"), "must not have replicated job that doesn't exist in the runtime job template"))
                continue
            pod = ((((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {})
            errors += _container_patch_errors(job_path, job.get("name"), job["name"], pod, containers[job["name"]])
    return errors


def _override_errors(trainjob: dict, runtime: dict) -> list[FieldError]:
    """Seed-era (v2.1) podTemplateOverrides: same rules and messages as v2.1."""
    errors = []
    containers = _job_containers(runtime)
    overrides = trainjob["spec"].get("podTemplateOverrides") or []
    path = "spec.podTemplateOverrides"
    for override in overrides:
        for target in override.get("targetJobs") or []:
            if target.get("name") not in containers:
                errors.append(_invalid(path, "...", "must not have targetJob that doesn't exist in the runtime job template"))
                continue
            errors += _container_patch_errors(path, "...", target["name"], override.get("spec") or {}, containers[target["name"]])
    if C.LABEL_ANCESTOR in (trainjob["spec"].get("labels") or {}):
        errors.append(_invalid(f"spec.labels[{C.LABEL_ANCESTOR}]", trainjob["spec"]["labels"][C.LABEL_ANCESTOR],
                               "must not set the reserved label; it is owned by the runtime"))
    return errors


def _reserved_env_errors(trainer: dict, reserved: Iterable[str]) -> list[FieldError]:
    names = [e.get("name") for e in trainer.get("env") or []]
    bad = [n for n in names if n in set(reserved)]
    if not bad:
        return []
    return [_invalid("spec.trainer.env", trainer.get("env"), f"must not have reserved envs, invalid envs configured: [{' '.join(bad)}]")]


def _ml_policy_errors(trainjob: dict, runtime: dict) -> list[FieldError]:
    ml = (runtime.get("spec") or {}).get("mlPolicy") or {}
    trainer = trainjob["spec"].get("trainer") or {}
    errors: list[FieldError] = []
    if "torch" in ml:
        containers = _job_containers(runtime)
        for target in (ml["torch"].get("envInjection") or {}).get("targets") or []:
            for name in target.get("containerNames") or []:
                if name not in containers.get(target.get("jobName"), set()):
                    errors.append(_invalid("spec.runtimeRef", trainjob["spec"]["runtimeRef"],
                                           f"envInjection target podSet {target.get('jobName')!r} container {name!r} not found in runtime template"))
        reserved = C.TORCH_RESERVED_ENVS + (C.TORCH_ELASTIC_RESERVED_ENVS if ml["torch"].get("elasticPolicy") else ())
        errors += _reserved_env_errors(trainer, reserved)
        if torchtune.is_torchtune(trainjob["spec"].get("trainer")):
            errors += _torchtune_errors(trainjob, runtime, ml["torch"])
    if "mpi" in ml:
        mpi = ml["mpi"]
        names = {j.get("name") for j in _jobs(runtime)}
        if mpi.get("runLauncherAsNode") and (trainer.get("numNodes") or 0) >= 2 and not {C.LAUNCHER, C.NODE} <= names:
            errors.append(_invalid("spec.trainer.numNodes", trainer.get("numNodes"),
                                   "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node"))
        errors += _reserved_env_errors(trainer, C.MPI_RESERVED_ENVS)
        nproc = trainer.get("numProcPerNode")
        if isinstance(nproc, str) and not nproc.isdigit():
            errors.append(_invalid("spec.trainer.numProcPerNode", nproc, "must be an integer for MPI runtimes"))
    errors += flux.validation_errors(trainjob, runtime)
    if "xgboost" in ml:
        for i, env in enumerate(trainer.get("env") or []):
            if env.get("name") in C.XGBOOST_RESERVED_ENVS:
                errors.append(_forbidden(f"spec.trainer.env[{i}]", f"{env['name']} is reserved for the XGBoost runtime"))
    return errors


def _torchtune_errors(trainjob: dict, runtime: dict, torch_policy: dict) -> list[FieldError]:
    """GPUs per node as upstream's webhook sees them: trainer.resourcesPerNode, else the runtime's `node`
    container after the TrainJob's patches and overrides."""
    trainer = trainjob["spec"]["trainer"]
    requested = trainer.get("numProcPerNode", torch_policy.get("numProcPerNode", "auto"))
    resources = trainer.get("resourcesPerNode")
    try:
        if not resources:
            resources = runtime_node_resources(new_runtime_info(trainjob, runtime))
        gpus = gpu_count(resources if isinstance(resources, dict) else None)
    except ControllerError:
        gpus = 0  # the schema check and the trial build report what is malformed
    return torchtune.validation_errors(trainjob, torchtune.int_or_string(requested), gpus)


def _update_errors(trainjob: dict, old: dict | None, cluster_objects: list[dict]) -> list[FieldError]:
    if old is None:
        return []
    errors = []
    path = "spec.runtimePatches"

    def comparable(tj):
        return [{k: v for k, v in p.items() if k != "time"} for p in tj["spec"].get("runtimePatches") or []]

    if comparable(trainjob) != comparable(old):
        if not trainjob["spec"].get("suspend") and not old["spec"].get("suspend"):
            errors.append(_forbidden(path, "RuntimePatches can only be modified when the TrainJob is suspended before or after the update"))
        else:
            jobset = k8s.find_object(cluster_objects, "JobSet", k8s.name_of(trainjob), k8s.namespace_of(trainjob))
            for job in ((jobset or {}).get("status") or {}).get("replicatedJobsStatus") or []:
                if job.get("active", 0) > 0:
                    errors.append(_forbidden(path, f"RuntimePatches cannot be modified when the JobSet's ReplicatedJob {job.get('name')} is still active"))
    if (trainjob["spec"].get("podTemplateOverrides") or []) != (old["spec"].get("podTemplateOverrides") or []) \
            and not trainjob["spec"].get("suspend"):
        errors.append(_forbidden("spec.podTemplateOverrides", "PodTemplateOverrides can only be modified when the TrainJob is suspended"))
    return errors


def _volcano_errors(trainjob: dict, runtime: dict, cluster_objects: list[dict]) -> list[FieldError]:
    if "volcano" not in ((runtime.get("spec") or {}).get("podGroupPolicy") or {}):
        return []
    errors = []
    queue = jobset_annotations(trainjob, runtime).get(C.VOLCANO_QUEUE_ANNOTATION)
    path = f"spec.annotations[{C.VOLCANO_QUEUE_ANNOTATION}]"
    if queue is not None and queue == "":
        errors.append(_invalid(path, queue, "Volcano queue name must not be empty"))
    elif queue and k8s.find_object(cluster_objects, "Queue", queue) is None:
        errors.append(_invalid(path, queue, f"Volcano queue {queue!r} doesn't exist; create it or pick an existing queue"))
    for job in _jobs(runtime):
        name = (k8s.pod_template(dict(job)).get("spec") or {}).get("priorityClassName")
        if name and name not in C.SYSTEM_PRIORITY_CLASSES and k8s.find_object(cluster_objects, "PriorityClass", name) is None:
            errors.append(_invalid("spec.templateSpec.priorityClassName", name,
                                   f'PriorityClass "{name}" doesn\'t exist: priorityclasses.scheduling.k8s.io "{name}" not found'))
    return errors


def _trial_build_errors(trainjob: dict, runtime: dict) -> list[FieldError]:
    from .build import build_objects
    try:
        build_objects(trainjob, runtime, key_generator=lambda: (b"", b""))
    except ControllerError as err:
        return [FieldError(err.field or "spec", "Invalid", err.message)]
    return []


# ---- AdmissionReview ----------------------------------------------------------------------------

Lookup = Callable[[str, str, "str | None"], "dict | None"]


def admission_review_response(review: dict, lookup: Lookup) -> dict:
    """Answer an admission.k8s.io/v1 AdmissionReview for TrainJob / (Cluster)TrainingRuntime.

    `lookup(kind, name, namespace)` returns a live object or None; it is asked for the referenced
    runtime, the TrainJob's JobSet, Volcano Queues and PriorityClasses.
    """
    request = (review or {}).get("request") or {}
    uid = request.get("uid", "")
    kind = (request.get("kind") or {}).get("kind") or ((request.get("object") or {}).get("kind"))
    operation = request.get("operation", "CREATE")
    new, old = request.get("object"), request.get("oldObject") if operation == "UPDATE" else None
    try:
        if operation == "DELETE":
            result = Result()
        elif kind == C.TRAINJOB_KIND:
            result = _review_trainjob(new, old, lookup)
        elif kind in C.RUNTIME_KINDS:
            result = validate_runtime(new, old)
        else:
            result = Result(errors=[FieldError("kind", "Invalid", f"trainyard does not validate {kind!r}")])
    except ControllerError as err:  # a malformed level the checks walk into: refuse naming it
        result = Result(errors=[_input_error(err)])
    response: dict = {"uid": uid, "allowed": result.allowed}
    if result.warnings:
        response["warnings"] = result.warnings
    if not result.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": result.message()}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _review_trainjob(new: dict, old: dict | None, lookup: Lookup) -> Result:
    try:
        trainjob = load_trainjob(new)
    except InputError as err:
        return Result(errors=[_input_error(err)])
    ref = trainjob["spec"]["runtimeRef"]
    namespace = k8s.namespace_of(trainjob)
    runtime = lookup(ref["kind"], ref["name"], namespace if ref["kind"] == C.TRAINING_RUNTIME_KIND else None) \
        if ref.get("kind") in C.RUNTIME_KINDS else None
    cluster: list[dict] = []
    jobset = lookup("JobSet", k8s.name_of(trainjob), namespace)
    if jobset:
        cluster.append(jobset)
    cluster += [found for kind, name, ns in admission_lookups(trainjob) if (found := lookup(kind, name, ns))]
    try:  # a malformed runtime is reported by validate_trainjob; nothing more to look up for it
        loaded = load_runtime(runtime) if isinstance(runtime, dict) else None
    except InputError:
        loaded = None
    if loaded:
        queue = jobset_annotations(trainjob, loaded).get(C.VOLCANO_QUEUE_ANNOTATION)
        if queue and (found := lookup("Queue", queue, None)):
            cluster.append(found)
        for job in _jobs(loaded):
            name = k8s.mapping(k8s.pod_template(dict(job)).get("spec")).get("priorityClassName")
            if name and (found := lookup("PriorityClass", name, None)):
                cluster.append(found)
    return validate_trainjob(new, runtime, old, cluster)


def default_trainjob_patch(trainjob: dict, old: dict | None, now: str) -> list[dict]:
    """The mutating webhook: JSON patch stamping `runtimePatches[].time` for new or changed entries
    (an unchanged entry keeps its old time)."""
    patches = (trainjob.get("spec") or {}).get("runtimePatches") or []
    previous = {p.get("manager"): p for p in ((old or {}).get("spec") or {}).get("runtimePatches") or []}
    ops = []
    for i, patch in enumerate(patches):
        before = previous.get(patch.get("manager"))
        same = before is not None and {k: v for k, v in before.items() if k != "time"} == {k: v for k, v in patch.items() if k != "time"}
        stamp = before.get("time", now) if same and before.get("time") else now
        if patch.get("time") != stamp:
            ops.append({"op": "add", "path": f"/spec/runtimePatches/{i}/time", "value": stamp})
    return ops
