"""Write a tiny Hugging Face Llama model (config, random safetensors, BPE tokenizer) for a real vLLM server.

Why: vLLM loads Hugging Face model directories, and no weights may be downloaded here. This writes one from
local data alone: a Llama config (vocab 1024, hidden 128, 2 layers, 4 heads, 2 KV heads, 4096 positions),
random weights, and a byte-level BPE tokenizer trained with the ``tokenizers`` library on text every machine
has (Python's ``pydoc_data.topics``, ``/usr/share/common-licenses`` when present), saved with special tokens and
a ChatML chat template so ``/v1/chat/completions`` runs. The model is meaningless as a language model; the
tests send ``ignore_eos`` for fixed lengths. With itself as its own draft it is accepted at temperature 0.

Runs under the vLLM venv's python (tests/realserver/install_vllm.sh), which has ``tokenizers``,
``safetensors`` and numpy; the repository's own venv need not. Deterministic for the same inputs.

Usage: ``VLLM_VENV/bin/python make_hf_model.py OUT_DIR``
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

VOCAB = 1024
HIDDEN = 128
INTERMEDIATE = 256
LAYERS = 2
HEADS = 4
KV_HEADS = 2
POSITIONS = 4096
SEED = 60
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LICENSES = Path("/usr/share/common-licenses")


def generator_hash() -> str:
    """Hash of this file: the cache key of the model it writes (a change to the recipe makes a new model)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def corpus() -> list[str]:
    """Local training text, in a fixed order: pydoc's topics, then the licence texts when the machine has them."""
    import pydoc_data.topics

    texts = [pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics)]
    if LICENSES.is_dir():
        for path in sorted(LICENSES.iterdir()):
            if path.is_file():
                texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return texts


def write_tokenizer(out: Path) -> None:
    """A byte-level BPE of ``VOCAB`` tokens, specials first (ids 0-2), and its Hugging Face config files."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.save(str(out / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": POSITIONS,
              "bos_token": SPECIALS[0], "eos_token": SPECIALS[2], "unk_token": SPECIALS[0],
              "pad_token": SPECIALS[0], "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    specials = {"bos_token": SPECIALS[0], "eos_token": SPECIALS[2], "unk_token": SPECIALS[0],
                "pad_token": SPECIALS[0]}
    (out / "special_tokens_map.json").write_text(json.dumps(specials, indent=1), encoding="utf-8")


def write_model(out: Path) -> None:
    """The Llama config and random weights (normal, std 0.02; norms 1), float32 safetensors."""
    import numpy as np
    from safetensors.numpy import save_file

    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB,
              "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
              "max_position_embeddings": POSITIONS, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float32",
              "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 0}
    (out / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": 2}),
                                                encoding="utf-8")
    rng = np.random.default_rng(SEED)
    head = HIDDEN // HEADS

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    tensors = {"model.embed_tokens.weight": rand(VOCAB, HIDDEN), "model.norm.weight": np.ones(HIDDEN, np.float32),
               "lm_head.weight": rand(VOCAB, HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        tensors |= {p + "input_layernorm.weight": np.ones(HIDDEN, np.float32),
                    p + "post_attention_layernorm.weight": np.ones(HIDDEN, np.float32),
                    p + "self_attn.q_proj.weight": rand(HEADS * head, HIDDEN),
                    p + "self_attn.k_proj.weight": rand(KV_HEADS * head, HIDDEN),
                    p + "self_attn.v_proj.weight": rand(KV_HEADS * head, HIDDEN),
                    p + "self_attn.o_proj.weight": rand(HIDDEN, HEADS * head),
                    p + "mlp.gate_proj.weight": rand(INTERMEDIATE, HIDDEN),
                    p + "mlp.up_proj.weight": rand(INTERMEDIATE, HIDDEN),
                    p + "mlp.down_proj.weight": rand(HIDDEN, INTERMEDIATE)}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})


def make_model(out: Path) -> Path:
    """Write the model into ``out`` (created), complete or not at all: built beside it, then renamed."""
    if (out / "config.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{os.getpid()}"
    tmp.mkdir()
    write_tokenizer(tmp)
    write_model(tmp)
    try:
        tmp.rename(out)
    except OSError:  # another process finished first: keep its copy
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_hf_model.py OUT_DIR")
    print(make_model(Path(sys.argv[1])))
