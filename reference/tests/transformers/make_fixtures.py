#!/usr/bin/env python3
"""Writes tiny Llama checkpoints with HuggingFace transformers, and what transformers computes on
them, as an independent check of the reference (reference_transformers_test).

transformers and PyTorch are only needed to regenerate the data, never to build or test:

    python3 -m venv venv && venv/bin/pip install torch transformers safetensors
    venv/bin/python reference/tests/transformers/make_fixtures.py

Each fixture folder gets config.json and model.safetensors as save_pretrained() writes them (bf16
weights), and expected.json: a prompt, the greedy continuation and, for every step, the logits of
the last position. transformers runs in fp32 on the bf16 weights (each rounded once, as the
checkpoint stores them), with a full forward pass per step (no KV cache), eager attention.
"""
import json
import math
import pathlib

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

HERE = pathlib.Path(__file__).resolve().parent
STEPS = 6

# Two small models that between them touch every option of the Llama family the loader reads:
# GQA, head_dim != hidden_size / heads, an eps other than 1e-5, llama3 RoPE scaling with a short
# original context (so the scaled frequencies matter at the prompt's positions), untied and tied
# embeddings.
FIXTURES = {
    "llama3-scaled-rope": dict(
        vocab_size=384, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
        max_position_embeddings=256, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                             low_freq_factor=1.0, high_freq_factor=4.0,
                             original_max_position_embeddings=16),
        bos_token_id=1, eos_token_id=2),
    "llama-tied": dict(
        vocab_size=320, hidden_size=96, intermediate_size=256, num_hidden_layers=3,
        num_attention_heads=6, num_key_value_heads=6, head_dim=16, rms_norm_eps=1e-5,
        max_position_embeddings=128, tie_word_embeddings=True,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0),
        bos_token_id=1, eos_token_id=2),
}


def fill_weights(model, generator, residual_gain):
    """Weights that keep activations O(1) through the layers, so logits are well separated:
    projections N(0, 1/in_features), norm weights 1 + N(0, 0.1^2), embeddings N(0, 1). The
    projections that write the residual stream (o_proj, down_proj) are scaled by residual_gain:
    with tied embeddings the input token's own embedding otherwise dominates the logits and the
    greedy continuation just repeats it."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=generator))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=generator))
            else:
                gain = residual_gain if name.endswith(("o_proj.weight", "down_proj.weight")) else 1
                p.copy_(gain * torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[1]))


def make(name, options, seed):
    out = HERE / name
    out.mkdir(exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    config = LlamaConfig(**options, attn_implementation="eager")
    model = LlamaForCausalLM(config)
    fill_weights(model, generator, residual_gain=2.0 if config.tie_word_embeddings else 1.0)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").unlink(missing_ok=True)  # sampling defaults: not read here
    # Read back what was written, in fp32. Converting the bf16 model in memory instead would also
    # keep RoPE's inverse frequencies (a buffer) rounded to bf16, which is not what a checkpoint
    # loaded in fp32 computes with.
    model = LlamaForCausalLM.from_pretrained(out, dtype=torch.float32,
                                             attn_implementation="eager").eval()

    prompt = torch.randint(3, config.vocab_size, (11,), generator=generator).tolist()
    ids = list(prompt)
    steps = []
    with torch.no_grad():
        for _ in range(STEPS):
            logits = model(torch.tensor([ids])).logits[0, -1]
            token = int(torch.argmax(logits))
            top2 = torch.topk(logits, 2).values
            steps.append({"token": token, "margin": float(top2[0] - top2[1]),
                          "logits": [float(v) for v in logits]})
            ids.append(token)
    expected = {
        "made_by": f"transformers {transformers.__version__}, torch {torch.__version__}",
        "prompt": prompt,
        "steps": steps,
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"{name}: prompt {prompt} -> {[s['token'] for s in steps]}, "
          f"smallest top-2 margin {min(s['margin'] for s in steps):.3f}")


if __name__ == "__main__":
    for i, (name, options) in enumerate(FIXTURES.items()):
        make(name, options, seed=1234 + i)
