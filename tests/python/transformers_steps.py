"""Training steps of tiny `transformers` models for the GPU check's eager
rows (scripts/gpu_check.py --eager-steps): GPT-2 and Llama, each with
``sdpa`` and eager attention, float32 and under ``torch.autocast("cuda",
torch.bfloat16)``, and AdamW as PyTorch picks it on the device (foreach on
CUDA), as a for-loop (``foreach=False``) and fused. Entries have the step
corpus's shape (step_models.Entry); the model's keyword inputs are in
``setup["kwinputs"]``. On a host without CUDA, autocast("cuda") is off and
a bf16 entry runs as float32."""

from __future__ import annotations

import torch

from step_models import Entry


def tiny_config(family: str, attention: str):
    """A tiny random config of `family` (gpt2, llama) with `attention`, use_cache off."""
    import transformers

    if family == "llama":
        config = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                          use_cache=False)
    else:
        config = transformers.GPT2Config(vocab_size=512, n_embd=128, n_layer=2, n_head=4, n_positions=256,
                                         use_cache=False, bos_token_id=0, eos_token_id=0)
    config._attn_implementation = attention
    return config


class _Autocast(torch.nn.Module):
    """The model's forward under torch.autocast("cuda", torch.bfloat16)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, **kwargs):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return self.model(**kwargs)


def _make(family: str, attention: str, autocast: bool):
    def make() -> torch.nn.Module:
        import transformers

        model = transformers.AutoModelForCausalLM.from_config(tiny_config(family, attention))
        return _Autocast(model) if autocast else model

    return make


def _ids() -> dict:
    ids = torch.randint(0, 512, (4, 128), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}


def _entries() -> list[Entry]:
    out = []
    for family in ("gpt2", "llama"):
        variants = [("sdpa", False, {}), ("eager", False, {}), ("sdpa", False, {"foreach": False}),
                    ("sdpa", False, {"fused": True}), ("sdpa", True, {})]
        for attention, autocast, optimizer_kwargs in variants:
            name = f"hf_{family}_{attention}" + ("_bf16_autocast" if autocast else "")
            name += "".join(f"_{k}_{str(v).lower()}" for k, v in optimizer_kwargs.items())
            setup = {"optimizer": torch.optim.AdamW, "optimizer_kwargs": optimizer_kwargs or None,
                     "kwinputs": _ids()}
            out.append(Entry(name, _make(family, attention, autocast), lambda: (), None, setup))
    return out


ENTRIES = _entries()
