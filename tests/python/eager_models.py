"""Tiny random HuggingFace ``transformers`` models for the eager front end's
tests: each family's own loss from ``labels``, no downloads (configs only).

Each maker returns ``(model, kwargs)`` on `device` ("cpu" or "meta"),
built from the same seed, so the CPU and meta models are the same model.
"""

from __future__ import annotations

from typing import Callable

import torch


def _quiet_transformers():
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


def _built(device: str, make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """make() on `device`, from seed 0 (the CPU and meta models are the same model)."""
    torch.manual_seed(0)
    with torch.device(device):
        return make()


def _ids(device: str, vocab: int, shape: tuple = (2, 16)) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, shape, generator=g).to(device)


def gpt2(device: str):
    tf = _quiet_transformers()
    cfg = tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=32, bos_token_id=0,
                        eos_token_id=0)
    model = _built(device, lambda: tf.GPT2LMHeadModel(cfg))  # the LM head tied to the embedding
    ids = _ids(device, 128)
    return model, {"input_ids": ids, "labels": ids}


def llama(device: str):
    tf = _quiet_transformers()
    cfg = tf.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=128, max_position_embeddings=32, bos_token_id=0,
                         eos_token_id=0, pad_token_id=0)
    model = _built(device, lambda: tf.LlamaForCausalLM(cfg))  # untied head, grouped-query attention, rotary
    ids = _ids(device, 128)
    return model, {"input_ids": ids, "labels": ids}


def bert(device: str):
    tf = _quiet_transformers()
    cfg = tf.BertConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                        vocab_size=128, max_position_embeddings=32, pad_token_id=0)
    model = _built(device, lambda: tf.BertForMaskedLM(cfg))
    ids = _ids(device, 128)
    return model, {"input_ids": ids, "labels": ids}


def t5(device: str):
    tf = _quiet_transformers()
    cfg = tf.T5Config(num_layers=2, num_decoder_layers=2, d_model=64, d_ff=128, d_kv=16, num_heads=4,
                      vocab_size=128, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = _built(device, lambda: tf.T5ForConditionalGeneration(cfg))  # encoder-decoder
    return model, {"input_ids": _ids(device, 128), "labels": _ids(device, 128, (2, 8))}


def vit(device: str):
    tf = _quiet_transformers()
    cfg = tf.ViTConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                       image_size=32, patch_size=8, num_labels=10)
    model = _built(device, lambda: tf.ViTForImageClassification(cfg))  # a convolution patch embedding
    g = torch.Generator().manual_seed(0)
    pixels = torch.randn(2, 3, 32, 32, generator=g).to(device)
    labels = torch.randint(0, 10, (2,), generator=g).to(device)
    return model, {"pixel_values": pixels, "labels": labels}


FAMILIES = {"gpt2": gpt2, "llama": llama, "bert": bert, "t5": t5, "vit": vit}
