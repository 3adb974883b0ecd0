"""TorchTune mode of the torch plugin: a TrainJob whose trainer command is exactly `[tune, run]`.

Upstream v2.3 semantics (`plugins/torch/torchtune.go`): the model comes from the runtime's name
(`torchtune-<family>-<size>`, e.g. `torchtune-llama3.2-1b` -> `llama3_2/1B`); the recipe and config are
chosen from the node count, processes per node, GPUs per node and the LoRA/QLoRA switches in
`trainer.args`; the command becomes `tune run [--rdzv_endpoint=<master>:29500] <recipe> --config
<model><suffix> <runtime-owned key=value items>` while `trainer.args` stay the container's args; no
PET_MASTER_* env (the rendezvous endpoint is on the command line).

`numProcPerNode` is an int-or-string as upstream's IntOrString: an int (or a seed-era digit string) is
an Int, anything else ("auto", seed-era "gpu") a String.
"""

from __future__ import annotations

from .. import constants as C
from trainyard import k8s as K
from .. import k8s
from ..schema import FieldError


class GoValue:
    """A bad value rendered the way Go's `%#v` prints it in an API error (no quotes added)."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GoValue) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def is_torchtune(trainer: dict | None) -> bool:
    return (trainer or {}).get("command") == C.TORCHTUNE_ENTRYPOINT


def int_or_string(value: int | str) -> int | str:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def model_from_runtime_name(name: str) -> str:
    """`torchtune-llama3.2-1b` -> `llama3_2/1B`; anything not made of exactly three dash-separated
    fields -> "" (which no supported model matches)."""
    fields = name.split("-")
    if len(fields) != 3:
        return ""
    return f"{fields[1].replace('.', '_')}/{fields[2].upper()}"


def uses_lora(args: list[str]) -> bool:
    return any(C.TORCHTUNE_LORA_ATTN_MODULES in arg for arg in args)


def _bool_arg_enabled(args: list[str], item: str) -> bool:
    for arg in args:
        name, sep, value = arg.partition("=")
        if sep and item in name and value.strip().lower() == "true":
            return True
    return False


def uses_qlora(args: list[str]) -> bool:
    """QLoRA = `model.quantize_base=True`, unless DoRA is switched on."""
    if _bool_arg_enabled(args, C.TORCHTUNE_USE_DORA):
        return False
    return _bool_arg_enabled(args, C.TORCHTUNE_QUANTIZE_BASE)


def recipe_and_config(num_nodes: int, nproc: int | str, gpus: int, args: list[str], runtime_name: str) -> tuple[str, str]:
    recipe, suffix = C.TORCHTUNE_FULL_DISTRIBUTED, C.TORCHTUNE_SUFFIX_FULL
    single_device = isinstance(nproc, int) and nproc == 1 or gpus == 1
    if num_nodes == 1 and single_device:
        if uses_qlora(args):
            recipe, suffix = C.TORCHTUNE_LORA_SINGLE_DEVICE, C.TORCHTUNE_SUFFIX_QLORA_SINGLE_DEVICE
        elif uses_lora(args):
            recipe, suffix = C.TORCHTUNE_LORA_SINGLE_DEVICE, C.TORCHTUNE_SUFFIX_LORA_SINGLE_DEVICE
        else:
            recipe, suffix = C.TORCHTUNE_FULL_SINGLE_DEVICE, C.TORCHTUNE_SUFFIX_FULL_SINGLE_DEVICE
    elif num_nodes == 1 and uses_qlora(args):
        recipe, suffix = C.TORCHTUNE_LORA_DISTRIBUTED, C.TORCHTUNE_SUFFIX_QLORA
    elif num_nodes == 1 and uses_lora(args):
        recipe, suffix = C.TORCHTUNE_LORA_DISTRIBUTED, C.TORCHTUNE_SUFFIX_LORA
    elif num_nodes > 1:
        suffix = C.TORCHTUNE_SUFFIX_FULL_MULTINODE
    return recipe, model_from_runtime_name(runtime_name) + suffix


def _config_key(item: str) -> str:
    return item.split("=", 1)[0]


def runtime_overrides(jobset_spec: dict) -> list[str]:
    """The runtime-owned `key=value` items of the `node` command of every Job labelled trainer."""
    out = []
    for job in k8s.replicated_jobs(jobset_spec):
        if K.ancestor_of(job) != C.ANCESTOR_TRAINER:
            continue
        for container in K.job_containers(job):
            if container.get("name") == C.NODE:
                out += [item for item in container.get("command") or []
                        if isinstance(item, str) and _config_key(item) in C.TORCHTUNE_IMMUTABLE_CONFIGS]
    return out


def needs_rendezvous(num_nodes: int, nproc: int | str, gpus: int) -> bool:
    """The rendezvous endpoint is only passed for multi-node or multi-device training."""
    return num_nodes > 1 or (isinstance(nproc, int) and nproc > 1) or (isinstance(nproc, str) and gpus > 1)


def command(trainjob_name: str, runtime_name: str, num_nodes: int, nproc: int | str, gpus: int,
            args: list[str], jobset_spec: dict) -> list[str]:
    """The rewritten trainer command (`nproc` already resolved: "auto" without GPUs is an int)."""
    out = list(C.TORCHTUNE_ENTRYPOINT)
    if needs_rendezvous(num_nodes, nproc, gpus):
        master = f"{trainjob_name}-{C.NODE}-0-0.{trainjob_name}"
        out.append(f"{C.TORCHTUNE_ARG_RDZV_ENDPOINT}={master}:{C.CONTAINER_TRAINER_PORT}")
    recipe, config = recipe_and_config(num_nodes, nproc, gpus, args, runtime_name)
    out += [recipe, C.TORCHTUNE_ARG_CONFIG, config]
    return out + runtime_overrides(jobset_spec)


def _go_int_or_string(value: int | str) -> GoValue:
    if isinstance(value, int):
        return GoValue(f'intstr.IntOrString{{Type:0, IntVal:{value}, StrVal:""}}')
    return GoValue(f'intstr.IntOrString{{Type:1, IntVal:0, StrVal:"{value}"}}')


def validation_errors(trainjob: dict, nproc: int | str, gpus: int) -> list[FieldError]:
    """Upstream's torchtune admission rules, in upstream's order. `nproc` is the requested (unresolved)
    value; `gpus` the GPUs per node of trainer.resourcesPerNode, else of the runtime's node container."""
    spec = trainjob["spec"]
    trainer = spec.get("trainer") or {}
    args = [a for a in trainer.get("args") or [] if isinstance(a, str)]
    runtime_name = spec["runtimeRef"]["name"]
    model = model_from_runtime_name(runtime_name)
    num_nodes = trainer.get("numNodes", 1)
    if not isinstance(num_nodes, int) or isinstance(num_nodes, bool):
        num_nodes = 1  # the schema check reports the bad value
    errors: list[FieldError] = []

    def invalid(path: str, value, message: str) -> None:
        errors.append(FieldError(path, "Invalid", message, value))

    if model not in C.TORCHTUNE_SUPPORTED_MODELS:
        invalid("spec.runtimeRef.name", runtime_name, f"must have a supported pretrained model, invalid model configured: {model}")
    if num_nodes > 1 and model != C.TORCHTUNE_MODEL_LLAMA3_3_70B:
        invalid("spec.trainer.numNodes", num_nodes, f"must be 1 for {model} model")
    _, config = recipe_and_config(num_nodes, nproc, gpus, args, runtime_name)
    if C.TORCHTUNE_SUFFIX_QLORA in config:
        if model == C.TORCHTUNE_MODEL_QWEN2_5_1_5B:
            invalid("spec.runtimeRef.name", runtime_name, f"QLoRA is not supported for {model} model")
        if C.TORCHTUNE_SUFFIX_QLORA_SINGLE_DEVICE not in config and model in (C.TORCHTUNE_MODEL_LLAMA3_2_1B,
                                                                               C.TORCHTUNE_MODEL_LLAMA3_2_3B):
            invalid("spec.trainer.numProcPerNode", _go_int_or_string(nproc),
                    f"must be auto or 1 for {model} model when using QLoRA")
            invalid("spec.trainer.resourcesPerNode", trainer.get("resourcesPerNode"),
                    f"must have gpu resource with value 1 for {model} model when using QLoRA")
    if num_nodes > 1 and (uses_lora(args) or uses_qlora(args)):
        invalid("spec.trainer.numNodes", num_nodes, "LoRA fine-tuning is not supported for multi-node training in TorchTune")
    for i, arg in enumerate(trainer.get("args") or []):
        key = _config_key(arg) if isinstance(arg, str) else None
        if key in C.TORCHTUNE_IMMUTABLE_CONFIGS:
            invalid(f"spec.trainer.args[{i}]", arg,
                    f'must not set immutable config "{key}" in trainer args; it is managed by the runtime')
    return errors
