#!/usr/bin/env python3
"""Writes tiny Llama and Gemma 3 checkpoints with HuggingFace transformers, and what transformers computes on
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
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

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

# Gemma 3: local layers whose window (4 and 6 positions) is shorter than the 11-token prompt, a
# local/global pattern that is not the default one, query_pre_attn_scalar != head_dim,
# hidden_size != heads x head_dim, and linear RoPE scaling on the global layers of the second.
# hidden_size is a perfect square so sqrt(d) is the same in bf16 and fp32: transformers rounds the
# embedding scale to the weights' dtype, and the expected logits come from an fp32 model.
GEMMA_FIXTURES = {
    "gemma3-local-global": dict(
        vocab_size=320, hidden_size=64, intermediate_size=160, num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=1, head_dim=48, query_pre_attn_scalar=32,
        sliding_window=4, rms_norm_eps=1e-6, max_position_embeddings=128,
        layer_types=["sliding_attention", "sliding_attention", "full_attention",
                     "sliding_attention"],
        rope_parameters=dict(full_attention=dict(rope_type="default", rope_theta=1000000.0),
                             sliding_attention=dict(rope_type="default", rope_theta=10000.0)),
        tie_word_embeddings=True, bos_token_id=2, eos_token_id=1, pad_token_id=0),
    "gemma3-scaled-untied": dict(
        vocab_size=288, hidden_size=144, intermediate_size=256, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, query_pre_attn_scalar=64,
        sliding_window=6, rms_norm_eps=1e-6, max_position_embeddings=128,
        layer_types=["full_attention", "sliding_attention", "full_attention"],
        rope_parameters=dict(full_attention=dict(rope_type="linear", factor=4.0,
                                                 rope_theta=1000000.0),
                             sliding_attention=dict(rope_type="default", rope_theta=10000.0)),
        tie_word_embeddings=False, bos_token_id=2, eos_token_id=1, pad_token_id=0),
}


def fill_weights(model, generator, residual_gain, gemma=False):
    """Weights that keep activations O(1) through the layers, so logits are well separated:
    projections N(0, 1/in_features), norm weights 1 + N(0, 0.1^2), embeddings N(0, 1). The
    projections that write the residual stream (o_proj, down_proj) are scaled by residual_gain:
    with tied embeddings the input token's own embedding otherwise dominates the logits and the
    greedy continuation just repeats it. Gemma's norms scale by (1 + w), so w = N(0, 0.1^2) gives
    scales near 1; there the norms after each sub-layer set the size of what it adds to the
    residual stream, so they (not o_proj and down_proj) carry the gain: 1 + w = residual_gain."""
    post_norms = ("post_attention_layernorm.weight", "post_feedforward_layernorm.weight")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if gemma and name.endswith(post_norms):
                p.copy_(residual_gain - 1 + 0.1 * torch.randn(p.shape, generator=generator))
            elif name.endswith("norm.weight"):
                p.copy_((0 if gemma else 1) + 0.1 * torch.randn(p.shape, generator=generator))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=generator))
            else:
                gain = residual_gain if not gemma and name.endswith(("o_proj.weight", "down_proj.weight")) else 1
                p.copy_(gain * torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[1]))


def make(name, options, seed, gemma=False):
    out = HERE / name
    out.mkdir(exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    config_class, model_class = ((Gemma3TextConfig, Gemma3ForCausalLM) if gemma
                                 else (LlamaConfig, LlamaForCausalLM))
    config = config_class(**options, attn_implementation="eager")
    model = model_class(config)
    if gemma:
        # Embeddings scaled by sqrt(d) would dwarf a sub-layer's normed output of scale ~1.
        fill_weights(model, generator, residual_gain=1.5 * math.sqrt(config.hidden_size),
                     gemma=True)
    else:
        fill_weights(model, generator, residual_gain=2.0 if config.tie_word_embeddings else 1.0)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").unlink(missing_ok=True)  # sampling defaults: not read here
    # Read back what was written, in fp32. Converting the bf16 model in memory instead would also
    # keep RoPE's inverse frequencies (a buffer) rounded to bf16, which is not what a checkpoint
    # loaded in fp32 computes with.
    model = model_class.from_pretrained(out, dtype=torch.float32,
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
    for i, (name, options) in enumerate(GEMMA_FIXTURES.items()):
        make(name, options, seed=4321 + i, gemma=True)
