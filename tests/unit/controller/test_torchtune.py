"""TorchTune mode (trainer command exactly [tune, run]): recipe/config choice, command rewrite, admission."""

import pytest

from trainyard.controller.admission import validate_trainjob
from trainyard.controller.build import build_objects
from trainyard.controller.errors import BuildError
from trainyard.controller.plugins import torchtune

from ctl_builders import container, env_of, fixed_key, job, runtime, the_jobset, trainjob

TUNE = ["tune", "run"]
LORA = ["model.lora_attn_modules=['q_proj','v_proj']"]
QLORA = ["model.quantize_base=True"]
MODEL_1B = "llama3_2/1B"
RUNTIME_COMMAND = ["tune", "run", "--rdzv_endpoint=localhost:29500", "full_finetune_distributed", "--config",
                   "llama3_2/1B_full", "dataset.source=parquet", "output_dir=/workspace/output",
                   "tokenizer.path=/workspace/model/original/tokenizer.model", "checkpointer.checkpoint_dir=/workspace/model"]
RUNTIME_OWNED = RUNTIME_COMMAND[-3:]


@pytest.mark.parametrize("name,model", [
    ("torchtune-llama3.2-1b", "llama3_2/1B"),
    ("torchtune-llama3.3-70b", "llama3_3/70B"),
    ("torchtune-qwen2.5-1.5b", "qwen2_5/1.5B"),
    ("torch-distributed", ""),
    ("torchtune-llama3.2-1b-v2", ""),
])
def test_model_from_runtime_name(name, model):
    assert torchtune.model_from_runtime_name(name) == model


@pytest.mark.parametrize("args,lora,qlora", [
    (LORA, True, False),
    (QLORA, False, True),
    (["model.quantize_base=true"], False, True),
    (["model.quantize_base=False"], False, False),
    (["model.quantize_base"], False, False),
    (QLORA + ["model.use_dora=True"], False, False),
    (QLORA + ["model.use_dora=False"], False, True),
    (["epochs=2"], False, False),
])
def test_lora_and_qlora_switches(args, lora, qlora):
    assert torchtune.uses_lora(args) is lora
    assert torchtune.uses_qlora(args) is qlora


@pytest.mark.parametrize("nodes,nproc,gpus,args,recipe,suffix", [
    (1, "auto", 1, [], "full_finetune_single_device", "_full_single_device"),
    (1, "auto", 1, LORA, "lora_finetune_single_device", "_lora_single_device"),
    (1, "auto", 1, QLORA, "lora_finetune_single_device", "_qlora_single_device"),
    (1, "auto", 4, [], "full_finetune_distributed", "_full"),
    (1, "auto", 4, LORA, "lora_finetune_distributed", "_lora"),
    (1, "auto", 4, QLORA, "lora_finetune_distributed", "_qlora"),
    (2, "auto", 8, [], "full_finetune_distributed", "_full_multinode"),
    (2, "auto", 8, LORA, "full_finetune_distributed", "_full_multinode"),
    (1, 1, 4, [], "full_finetune_single_device", "_full_single_device"),
    (1, 4, 4, [], "full_finetune_distributed", "_full"),
    (1, "gpu", 2, [], "full_finetune_distributed", "_full"),
])
def test_recipe_and_config(nodes, nproc, gpus, args, recipe, suffix):
    assert torchtune.recipe_and_config(nodes, nproc, gpus, args, "torchtune-llama3.2-1b") == (recipe, MODEL_1B + suffix)


def test_runtime_overrides_come_only_from_the_trainer_node_container():
    spec = {"replicatedJobs": [
        job("node", "trainer", containers=[{"name": "node", "command": RUNTIME_COMMAND},
                                           {"name": "sidecar", "command": ["output_dir=/elsewhere"]}]),
        job("other", "model-initializer", containers=[{"name": "node", "command": ["tokenizer.path=/x"]}]),
    ]}
    assert torchtune.runtime_overrides(spec) == RUNTIME_OWNED


def tune_runtime(name="torchtune-llama3.2-1b", gpus=2, **ml):
    node = {"name": "node", "image": "tt", "command": RUNTIME_COMMAND}
    if gpus is not None:
        node["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return runtime(jobs=[job("node", "trainer", containers=[node])], ml={"numNodes": 1, "torch": {}, **ml}, name=name)


def tune_job(runtime_name="torchtune-llama3.2-1b", **trainer):
    return trainjob(runtime_name=runtime_name, trainer={"command": TUNE, **trainer})


def node_of(tj, rt):
    return container(the_jobset(build_objects(tj, rt, key_generator=fixed_key)), "node")


RDZV = "--rdzv_endpoint=tj-node-0-0.tj:29500"


@pytest.mark.parametrize("trainer,gpus,expected", [
    ({}, 2, [RDZV, "full_finetune_distributed", "--config", "llama3_2/1B_full"]),
    ({}, 1, ["full_finetune_single_device", "--config", "llama3_2/1B_full_single_device"]),
    ({"args": LORA}, 2, [RDZV, "lora_finetune_distributed", "--config", "llama3_2/1B_lora"]),
    ({"numProcPerNode": 1}, 2, ["full_finetune_single_device", "--config", "llama3_2/1B_full_single_device"]),
    ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}}}, 2,
     ["full_finetune_single_device", "--config", "llama3_2/1B_full_single_device"]),
    # no GPU: "auto" becomes the CPU count before the recipe is chosen
    ({"resourcesPerNode": {"requests": {"cpu": "3"}}}, None, [RDZV, "full_finetune_distributed", "--config", "llama3_2/1B_full"]),
    ({"resourcesPerNode": {"requests": {"cpu": "1"}}}, None, ["full_finetune_single_device", "--config", "llama3_2/1B_full_single_device"]),
])
def test_command_rewrite(trainer, gpus, expected):
    node = node_of(tune_job(**trainer), tune_runtime(gpus=gpus))
    assert node["command"] == TUNE + expected + RUNTIME_OWNED
    assert node.get("args") == trainer.get("args")


def test_multi_node_70b_rewrite_and_env():
    rt = tune_runtime(name="torchtune-llama3.3-70b", gpus=8)
    node = node_of(tune_job("torchtune-llama3.3-70b", numNodes=2), rt)
    assert node["command"] == TUNE + [RDZV, "full_finetune_distributed", "--config", "llama3_3/70B_full_multinode"] + RUNTIME_OWNED
    env = dict(env_of(node))
    assert env["PET_NNODES"] == "2" and env["PET_NPROC_PER_NODE"] == "auto" and "PET_NODE_RANK" in env
    assert "PET_MASTER_ADDR" not in env and "PET_MASTER_PORT" not in env  # rendezvous is on the command line
    assert node["ports"] == [{"containerPort": 29500}]


def test_envinjection_targets_still_get_master_env_in_torchtune_mode():
    node = {"name": "node", "command": RUNTIME_COMMAND, "resources": {"limits": {"nvidia.com/gpu": 2}}}
    rt = runtime(jobs=[job("node", "trainer", containers=[node, {"name": "probe"}])], name="torchtune-llama3.2-1b",
                 ml={"torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["probe"]}]}}})
    probe = container(the_jobset(build_objects(tune_job(), rt, key_generator=fixed_key)), "node", "probe")
    assert dict(env_of(probe))["PET_MASTER_ADDR"] == "tj-node-0-0.tj"


def test_the_trainjob_passed_in_is_not_modified():
    tj = tune_job()
    build_objects(tj, tune_runtime(), key_generator=fixed_key)
    assert tj["spec"]["trainer"]["command"] == TUNE


def test_a_longer_tune_command_is_plain_torch():
    command = ["tune", "run", "my_recipe", "--config", "x.yaml"]
    node = node_of(trainjob(runtime_name="torchtune-llama3.2-1b", trainer={"command": command}), tune_runtime())
    assert node["command"] == command
    assert "PET_MASTER_ADDR" in dict(env_of(node))


def test_torchtune_with_elastic_policy_is_refused():
    rt = runtime(ml={"torch": {"elasticPolicy": {"minNodes": 1, "maxNodes": 2}}}, name="torchtune-llama3.2-1b")
    with pytest.raises(BuildError, match="cannot train elastically"):
        build_objects(tune_job(), rt, key_generator=fixed_key)


# ---- admission --------------------------------------------------------------------------------------

NPROC_AUTO = 'intstr.IntOrString{Type:1, IntVal:0, StrVal:"auto"}'


@pytest.mark.parametrize("runtime_name,trainer,gpus,errors", [
    ("torchtune-llama3.2-1b", {}, 2, []),
    ("torchtune-llama3.2-1b", {"args": LORA}, 2, []),
    ("torchtune-llama3.2-1b", {"args": QLORA}, 1, []),
    ("torchtune-llama3.3-70b", {"numNodes": 4}, 8, []),
    ("torchtune-mistral-7b", {}, 2, [
        'spec.runtimeRef.name: Invalid value: "torchtune-mistral-7b": must have a supported pretrained model, '
        "invalid model configured: mistral/7B"]),
    ("torchtune-llama3.2-1b", {"numNodes": 2}, 2, [
        "spec.trainer.numNodes: Invalid value: 2: must be 1 for llama3_2/1B model"]),
    ("torchtune-qwen2.5-1.5b", {"args": QLORA}, 1, [
        'spec.runtimeRef.name: Invalid value: "torchtune-qwen2.5-1.5b": QLoRA is not supported for qwen2_5/1.5B model']),
    ("torchtune-llama3.2-3b", {"args": QLORA}, 2, [
        f"spec.trainer.numProcPerNode: Invalid value: {NPROC_AUTO}: must be auto or 1 for llama3_2/3B model when using QLoRA",
        'spec.trainer.resourcesPerNode: Invalid value: "null": must have gpu resource with value 1 for llama3_2/3B model when using QLoRA']),
    ("torchtune-llama3.3-70b", {"numNodes": 2, "args": LORA}, 8, [
        "spec.trainer.numNodes: Invalid value: 2: LoRA fine-tuning is not supported for multi-node training in TorchTune"]),
    ("torchtune-llama3.2-1b", {"args": ["epochs=1", "output_dir=/tmp/x", "tokenizer.merges_file=m"]}, 2, [
        'spec.trainer.args[1]: Invalid value: "output_dir=/tmp/x": must not set immutable config "output_dir" in '
        "trainer args; it is managed by the runtime",
        'spec.trainer.args[2]: Invalid value: "tokenizer.merges_file=m": must not set immutable config '
        '"tokenizer.merges_file" in trainer args; it is managed by the runtime']),
])
def test_torchtune_admission(runtime_name, trainer, gpus, errors):
    result = validate_trainjob(tune_job(runtime_name, **trainer), tune_runtime(name=runtime_name, gpus=gpus))
    assert [str(e) for e in result.errors] == errors


@pytest.mark.parametrize("runtime_gpus,trainer_resources,allowed", [
    (1, None, True),  # the runtime's node container has one GPU: single-device QLoRA
    (2, {"limits": {"nvidia.com/gpu": 1}}, True),  # trainer.resourcesPerNode wins over the runtime
    (1, {"limits": {"nvidia.com/gpu": 2}}, False),
])
def test_torchtune_admission_gpus_per_node(runtime_gpus, trainer_resources, allowed):
    trainer = {"args": QLORA, **({"resourcesPerNode": trainer_resources} if trainer_resources else {})}
    result = validate_trainjob(tune_job("torchtune-llama3.2-3b", **trainer),
                               tune_runtime(name="torchtune-llama3.2-3b", gpus=runtime_gpus))
    assert result.allowed is allowed
