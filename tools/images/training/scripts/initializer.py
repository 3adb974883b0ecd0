"""A stand-in for Kubeflow's dataset and model initializers, for machines without Hugging Face.

Upstream's initializer images download `STORAGE_URI` (hf://, s3://) into the shared volume the runtime mounts
at /workspace; the trainer starts once both completed and reads /workspace/dataset and /workspace/model. This
program writes the same layout from a `tiny://` URI instead, generated on the spot, so the runtime's volume,
ordering and the trainer's reading run for real:

- `tiny://instruct-dataset`: /workspace/dataset/data/train.parquet, an instruct set (`input`, `output`);
- `tiny://llama3.2-1b`, `tiny://llama3.2-3b`: /workspace/model in the layout of Meta's Llama 3.2 1B/3B Instruct
  on Hugging Face (config.json, the weights in one file or, for 3B, two shards with their index; random weights
  of a 2-layer Llama 3.2) with the tiktoken file at original/tokenizer.model (the 256 byte tokens);
- `tiny://qwen2.5-1.5b`: the same for Qwen 2.5 1.5B Instruct (a 2-layer Qwen 2, q/k/v biases) with vocab.json and
  merges.txt (the 256 byte tokens of byte-level BPE, no merges).

It is the training image's default command, so the catalog's initializer containers (they set none) run it.
Any other scheme is refused, naming what upstream's image would do.
"""

import base64
import json
import os
import sys
from pathlib import Path

WORKSPACE = Path(os.environ.get("WORKSPACE", "/workspace"))
TINY = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
        "intermediate_size": 128, "max_position_embeddings": 512, "head_dim": 16, "tie_word_embeddings": True,
        "torch_dtype": "float32"}
TINY_LLAMA = {**TINY, "vocab_size": 128256, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
              "architectures": ["LlamaForCausalLM"], "model_type": "llama"}
TINY_QWEN = {**TINY, "vocab_size": 151936, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
             "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}
"""Vocabularies as large as the real ones: their special tokens have fixed ids near the end."""


def write_dataset(root: Path) -> None:
    """Words and their reversals: a pattern a tiny model picks up in a few steps."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    words = ["kube", "gang", "queue", "tenant", "torch", "volcano", "jobset", "rack", "spine", "node", "pod", "gpu"]
    inputs = [f"reverse {w}" for w in words] * 8
    outputs = [w[::-1] for w in words] * 8
    (root / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"input": inputs, "output": outputs}), root / "data" / "train.parquet")
    print(f"initializer: dataset of {len(inputs)} rows at {root / 'data' / 'train.parquet'}", flush=True)


def hf_weights(config: dict, attention_bias: bool) -> dict:
    """Random weights under Hugging Face's Llama/Qwen2 names (no lm_head: the embeddings are tied)."""
    import torch

    torch.manual_seed(0)
    dim, layers, inter = config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]
    q_dim, kv_dim = config["num_attention_heads"] * config["head_dim"], config["num_key_value_heads"] * config["head_dim"]
    weights = {"model.embed_tokens.weight": torch.randn(config["vocab_size"], dim) * 0.02,
               "model.norm.weight": torch.ones(dim)}
    shapes = {"self_attn.q_proj": (q_dim, dim), "self_attn.k_proj": (kv_dim, dim), "self_attn.v_proj": (kv_dim, dim),
              "self_attn.o_proj": (dim, q_dim), "mlp.gate_proj": (inter, dim), "mlp.up_proj": (inter, dim),
              "mlp.down_proj": (dim, inter)}
    for layer in range(layers):
        prefix = f"model.layers.{layer}"
        for name, shape in shapes.items():
            weights[f"{prefix}.{name}.weight"] = torch.randn(*shape) * 0.02
            if attention_bias and name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"):
                weights[f"{prefix}.{name}.bias"] = torch.zeros(shape[0])
        weights[f"{prefix}.input_layernorm.weight"] = torch.ones(dim)
        weights[f"{prefix}.post_attention_layernorm.weight"] = torch.ones(dim)
    return weights


def write_checkpoint(root: Path, config: dict, attention_bias: bool, shards: int = 1) -> None:
    """config.json and the weights: model.safetensors, or model-0000i-of-0000n.safetensors and their index."""
    from safetensors.torch import save_file

    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config, indent=1))
    weights = hf_weights(config, attention_bias)
    names = sorted(weights)
    files = ["model.safetensors"] if shards == 1 else [f"model-{i:05d}-of-{shards:05d}.safetensors"
                                                       for i in range(1, shards + 1)]
    weight_map = {}
    for index, file in enumerate(files):
        part = {name: weights[name] for name in names[index::len(files)]}
        save_file(part, root / file, metadata={"format": "pt"})
        (root / file).chmod(0o644)  # safetensors writes 0600; the trainer may run as another user
        weight_map.update(dict.fromkeys(part, file))
    if shards > 1:
        (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    print(f"initializer: tiny {config['model_type']} ({config['num_hidden_layers']} layers, dim "
          f"{config['hidden_size']}) at {root}", flush=True)


def byte_level_unicode() -> list[str]:
    """GPT-2's byte-to-character table of byte-level BPE: printable bytes stand for themselves."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
                 *range(ord("\u00ae"), ord("\u00ff") + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + extra)
            extra += 1
    return [chars[byte] for byte in range(256)]


def write_llama(root: Path, shards: int = 1) -> None:
    write_checkpoint(root, TINY_LLAMA, attention_bias=False, shards=shards)
    (root / "original").mkdir(exist_ok=True)
    (root / "original" / "tokenizer.model").write_text(
        "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))


def write_qwen(root: Path) -> None:
    write_checkpoint(root, TINY_QWEN, attention_bias=True)
    (root / "vocab.json").write_text(json.dumps({char: i for i, char in enumerate(byte_level_unicode())}))
    (root / "merges.txt").write_text("#version: 0.2\n")


WRITERS = {"tiny://instruct-dataset": ("dataset", write_dataset),
           "tiny://llama3.2-1b": ("model", write_llama),
           "tiny://llama3.2-3b": ("model", lambda root: write_llama(root, shards=2)),
           "tiny://qwen2.5-1.5b": ("model", write_qwen)}


def main() -> int:
    uri = os.environ.get("STORAGE_URI", "")
    if uri not in WRITERS:
        print(f"initializer: STORAGE_URI={uri!r} is not one of {', '.join(WRITERS)}; this stand-in generates "
              "them offline (upstream's initializer images download hf:// and s3:// URIs)", file=sys.stderr)
        return 2
    folder, write = WRITERS[uri]
    write(WORKSPACE / folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
