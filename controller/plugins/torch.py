"""Torch ML policy: PET_* env for torchrun, numProcPerNode resolution, envInjection, elastic training.

A trainer command of exactly `[tune, run]` switches to torchtune mode (see `torchtune`): no PET_MASTER_*
env on the node container and a rewritten `tune run` command.

numProcPerNode (trainer value, else the seed-era `mlPolicy.torch.numProcPerNode`, else "auto"):
an integer is used as is; "cpu", or "auto" without GPUs, becomes max(1, ceil(cpu)); "gpu" and "auto"
with GPUs stay literal for torchrun to resolve (v2.1 semantics; v2.3 is the int/"auto" subset).

Elastic (seed-era `elasticPolicy`, beyond upstream v2.3 which removed it): PET_NNODES=`min:max`
(torchrun `--nnodes=min:max`), PET_MAX_RESTARTS (`--max-restarts`), c10d rendezvous on the master
host, JobSet `failurePolicy.maxRestarts`. The trainer starts `numNodes` pods (must lie in
[minNodes, maxNodes]) or maxNodes. `metrics` (HPA autoscaling) cannot be honoured: refused.
"""

from __future__ import annotations

from .. import constants as C
from .. import k8s
from ..errors import BuildError, ControllerError, ValidationError
from ..info import RuntimeInfo, new_runtime_info
from ..resources import cpu_count, gpu_count
from ..schema import FieldError
from ..validation import invalid, job_containers, ml_policy, reserved_env_errors
from . import torchtune
from .common import (master_host, node_gpus, resources_per_node, runtime_node_resources, set_trainer_count_from_num_nodes,
                     trainer_count, upsert_trainer_env)
from .framework import Context


def resolve_num_proc_per_node(value: int | str | None, resources: dict | None, claimed_gpus: int = 0) -> str:
    """The PET_NPROC_PER_NODE value; `claimed_gpus`: the GPUs the TrainJob's resourceClaimsPerNode give a node
    (KEP-2782: `auto` counts them as GPUs, not the CPUs)."""
    if value is None:
        value = "auto"
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return str(int(value))
    if value == "cpu" or (value == "auto" and gpu_count(resources) == 0 and claimed_gpus == 0):
        return str(max(1, cpu_count(resources)))
    if value in ("auto", "gpu"):
        return value
    raise ValidationError(f"invalid numProcPerNode {value!r}; use auto, cpu, gpu or an integer >= 1",
                          "spec.trainer.numProcPerNode")


def enforce_ml_policy(info: RuntimeInfo, ctx: Context) -> None:
    torch = (info.ml_policy or {}).get("torch")
    if torch is None:
        return
    trainer = info.trainer or {}
    elastic = torch.get("elasticPolicy")
    if elastic and torchtune.is_torchtune(trainer):
        raise BuildError("torchtune (command: [tune, run]) chooses its own rendezvous and cannot train "
                         "elastically; use a runtime without mlPolicy.torch.elasticPolicy or a torchrun command",
                         "spec.trainer.command")
    if elastic:
        nnodes = _enforce_elastic_count(info, elastic)
    else:
        set_trainer_count_from_num_nodes(info)
        nnodes = str(trainer_count(info))

    requested = trainer.get("numProcPerNode", torch.get("numProcPerNode"))
    nproc = resolve_num_proc_per_node(requested, resources_per_node(info), node_gpus(info))

    pet_env = [
        k8s.env_value(C.TORCH_ENV_NUM_NODES, nnodes),
        k8s.env_value(C.TORCH_ENV_NPROC, nproc),
        k8s.env_field_ref(C.TORCH_ENV_NODE_RANK, C.JOB_COMPLETION_INDEX_FIELD),
    ]
    master_env = [
        k8s.env_value(C.TORCH_ENV_MASTER_ADDR, master_host(info)),
        k8s.env_value(C.TORCH_ENV_MASTER_PORT, str(C.CONTAINER_TRAINER_PORT)),
    ]
    elastic_env = _elastic_env(info, elastic) if elastic else []

    container = upsert_trainer_env(info)
    if container is not None:
        if torchtune.is_torchtune(trainer):
            k8s.upsert_env(container, pet_env)
            _rewrite_torchtune_command(info, nproc)
        else:
            k8s.upsert_env(container, pet_env + master_env + elastic_env)
        k8s.upsert_port(container, C.CONTAINER_TRAINER_PORT)

    for target in (torch.get("envInjection") or {}).get("targets") or []:
        job = k8s.job_to_edit(info.spec, target.get("jobName"))
        for name in target.get("containerNames") or []:
            extra = k8s.find_container(job, name, include_init=True)
            if extra is None:
                raise ValidationError(f"envInjection target podSet {target.get('jobName')!r} container {name!r} "
                                      "not found in runtime template", "spec.runtimeRef")
            k8s.upsert_env(extra, pet_env + master_env + elastic_env)


def _rewrite_torchtune_command(info: RuntimeInfo, nproc: str) -> None:
    """The trainer command the JobSet gets (the TrainJob itself is left as written)."""
    trainer = info.trainer or {}
    new_command = torchtune.command(
        info.name, info.trainjob["spec"]["runtimeRef"]["name"], trainer_count(info),
        torchtune.int_or_string(nproc), node_gpus(info), trainer.get("args") or [], info.spec)
    info.trainjob["spec"]["trainer"] = {**trainer, "command": new_command}


def _enforce_elastic_count(info: RuntimeInfo, elastic: dict) -> str:
    field = "mlPolicy.torch.elasticPolicy"
    if elastic.get("metrics"):
        raise BuildError("autoscaling on metrics is not supported: JobSet cannot resize a running job and "
                         "trainyard creates no HPA; remove metrics (minNodes, maxNodes, maxRestarts are honoured)",
                         f"{field}.metrics")
    low, high = elastic.get("minNodes"), elastic.get("maxNodes")
    if low is None and high is None:
        set_trainer_count_from_num_nodes(info)
        return str(trainer_count(info))
    low = low if low is not None else 1
    high = high if high is not None else low
    if low > high:
        raise ValidationError(f"minNodes ({low}) must be less than or equal to maxNodes ({high})", field)
    num_nodes = (info.trainer or {}).get("numNodes")
    if num_nodes is not None and not low <= num_nodes <= high:
        raise ValidationError(f"numNodes {num_nodes} is outside the elastic range [{low}, {high}] of the runtime; "
                              "set numNodes within it or omit it", "spec.trainer.numNodes")
    pod_set = info.pod_set_by_ancestor(C.ANCESTOR_TRAINER)
    if pod_set is not None:
        pod_set.count = num_nodes if num_nodes is not None else high
    return f"{low}:{high}" if low != high else str(low)


def _elastic_env(info: RuntimeInfo, elastic: dict) -> list[dict]:
    env = []
    if elastic.get("maxRestarts") is not None:
        env.append(k8s.env_value(C.TORCH_ENV_MAX_RESTARTS, str(elastic["maxRestarts"])))
        policy = info.spec.setdefault("failurePolicy", {})
        policy["maxRestarts"] = elastic["maxRestarts"]
        policy.setdefault("restartStrategy", "Recreate")
    if elastic.get("minNodes") is not None or elastic.get("maxNodes") is not None:
        env += [
            k8s.env_value(C.TORCH_ENV_RDZV_BACKEND, "c10d"),
            k8s.env_value(C.TORCH_ENV_RDZV_ENDPOINT, f"{master_host(info)}:{C.CONTAINER_TRAINER_PORT}"),
            k8s.env_value(C.TORCH_ENV_RDZV_ID, info.name),
        ]
    return env


def validate(trainjob: dict, runtime: dict, old: dict | None) -> list[FieldError]:
    """Upstream's torch admission: envInjection targets exist, PET_* env reserved, torchtune's rules."""
    ml = ml_policy(runtime)
    if "torch" not in ml:
        return []
    trainer = trainjob["spec"].get("trainer") or {}
    errors: list[FieldError] = []
    containers = job_containers(runtime)
    for target in (ml["torch"].get("envInjection") or {}).get("targets") or []:
        for name in target.get("containerNames") or []:
            if name not in containers.get(target.get("jobName"), set()):
                errors.append(invalid("spec.runtimeRef", trainjob["spec"]["runtimeRef"],
                                      f"envInjection target podSet {target.get('jobName')!r} container {name!r} not found in runtime template"))
    reserved = C.TORCH_RESERVED_ENVS + (C.TORCH_ELASTIC_RESERVED_ENVS if ml["torch"].get("elasticPolicy") else ())
    errors += reserved_env_errors(trainer, reserved)
    if torchtune.is_torchtune(trainjob["spec"].get("trainer")):
        errors += _torchtune_errors(trainjob, runtime, ml["torch"])
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
