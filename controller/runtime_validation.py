"""Admission of TrainingRuntimes and ClusterTrainingRuntimes (pure): CRD schema + CEL rules (`api.py`),
upstream's runtime webhook (ancestor replicas, required containers, deprecation warning), and v2.4's limit of
20 characters on a replicatedJob's name.

Beyond upstream: a runtime whose trainer job lacks the Job-level ancestor label, or has no container
named `node`, still builds as upstream would, but admission WARNS and names the fix.
"""

from __future__ import annotations

from trainyard import k8s as K
from . import constants as C
from . import k8s
from .errors import InputError
from .inputs import load_runtime, runtime_schema
from .schema import FieldError, validate
from .seed_topology import topology_errors, topology_warnings
from .validation import Result, input_error, invalid, runtime_jobs, strip_dot

DEPRECATION = ('ClusterTrainingRuntime "{name}" is deprecated and will be removed in a future release of Kubeflow '
               'Trainer. See runtime deprecation policy: '
               'https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy')
_ANCESTOR_CONTAINER = {C.ANCESTOR_TRAINER: C.NODE, C.DATASET_INITIALIZER: C.DATASET_INITIALIZER,
                       C.MODEL_INITIALIZER: C.MODEL_INITIALIZER}


def validate_runtime(runtime: dict, old: dict | None = None) -> Result:
    """TrainingRuntime / ClusterTrainingRuntime admission (create when `old` is None, else update)."""
    result = Result()
    try:
        runtime = load_runtime(runtime)
        old_rt = load_runtime(old) if old is not None else None
    except InputError as err:
        result.errors.append(input_error(err))
        return result
    result.errors += [strip_dot(e) for e in validate(runtime_schema(), runtime, "", *([old_rt] if old_rt else []))]
    kind = runtime["kind"]
    webhook_on = (runtime["metadata"].get("labels") or {}).get(K.LABEL_WEBHOOK_VALIDATION) != "disabled"
    if webhook_on and (kind == C.CLUSTER_TRAINING_RUNTIME_KIND or old is None):
        result.errors += replicated_job_errors(runtime)
    if kind == C.CLUSTER_TRAINING_RUNTIME_KIND and old is None and is_deprecated(runtime):
        result.warnings.append(DEPRECATION.format(name=k8s.name_of(runtime)))
    result.warnings += trainer_job_warnings(runtime)
    result.errors += topology_errors(runtime)
    result.warnings += topology_warnings(runtime)
    return result


def is_deprecated(runtime: dict) -> bool:
    return ((runtime.get("metadata") or {}).get("labels") or {}).get(K.LABEL_SUPPORT) == K.SUPPORT_DEPRECATED


def replicated_job_errors(runtime: dict) -> list[FieldError]:
    errors = []
    base = "spec.template.spec.replicatedJobs"
    for i, job in enumerate(runtime_jobs(runtime)):
        name = job.get("name") or ""
        if len(name) > C.MAX_REPLICATED_JOB_NAME:
            errors.append(invalid(f"{base}[{i}].name", name, f"must be no more than {C.MAX_REPLICATED_JOB_NAME} "
                                  "characters (Kubeflow Trainer v2.4): shorten the job's name"))
        ancestor = K.ancestor_of(job)
        if ancestor not in _ANCESTOR_CONTAINER:
            continue
        if job.get("replicas", 1) != 1:
            errors.append(invalid(f"{base}[{i}].replicas", job.get("replicas"), "always must be 1"))
        names = [c.get("name") for c in K.job_containers(job)]
        if _ANCESTOR_CONTAINER[ancestor] not in names:
            errors.append(invalid(f"{base}[{i}].template.spec.template.spec.containers", names,
                                  f"must contain the required container for the ancestor: {ancestor}"))
    return errors


def trainer_job_warnings(runtime: dict) -> list[str]:
    """Beyond upstream: say how to fix a runtime whose trainer job TrainJob fields cannot reach."""
    jobs = runtime_jobs(runtime)
    base = "spec.template.spec.replicatedJobs"
    trainer = next(((i, j) for i, j in enumerate(jobs) if K.ancestor_of(j) == C.ANCESTOR_TRAINER), None)
    if trainer is None:
        guess = next(((i, j) for i, j in enumerate(jobs) if j.get("name") in (C.NODE, C.LAUNCHER)), None)
        if guess is None and len(jobs) == 1:
            guess = (0, jobs[0])
        if guess is None:
            return []
        i, job = guess
        where = ""
        pod_labels = ((k8s.pod_template(dict(job)).get("metadata") or {}).get("labels") or {})
        if pod_labels.get(K.LABEL_ANCESTOR):
            where = " (it is on the pod template; the Job template is where it is read)"
        return [f'replicatedJob "{job.get("name")}" has no Job-level label {K.LABEL_ANCESTOR}: trainer{where}, so '
                f"TrainJob trainer settings (image, command, numNodes, env, resourcesPerNode) will not reach it; add it "
                f"under {base}[{i}].template.metadata.labels"]
    i, job = trainer
    names = [c.get("name") for c in K.job_containers(job)]
    if C.NODE in names:
        return []
    return [f'the trainer job "{job.get("name")}" has no container named "node" (containers: {", ".join(map(str, names))}), '
            f"so TrainJob trainer settings and the ML policy env will not reach it; rename the training container to "
            f'"node" in {base}[{i}].template.spec.template.spec.containers']
