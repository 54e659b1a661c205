"""More tiny random `transformers` families for the eager front end's zoo
(tests/python/test_transformers_zoo.py), beside eager_models.py's five:
causal LMs (Mistral, Qwen2, Phi-3, Gemma, OPT, GPT-NeoX, Falcon), masked
LMs (RoBERTa, DistilBERT, ELECTRA), an encoder-decoder (BART), a
mixture-of-experts model (Mixtral), vision (DeiT, the windowed Swin, the
convolutional ResNet and ConvNeXt), contrastive image-text (CLIP) and speech
(Whisper, and Wav2Vec2 classifying audio). Each maker returns ``(model,
kwargs)`` on `device` ("cpu" or "meta") from seed 0, so the CPU and meta
models are the same model; configs only, no downloads.

``ALL`` is the whole zoo, eager_models.py's five included, and ``KIND``
each family's kind; ``variants(family)`` lists the ways a step of it is
taken (``variant`` makes one): the attention implementation (``sdpa``,
transformers' default, or ``eager``), an ``attention_mask`` (none, all
ones as a tokenizer gives an unpadded batch, or ``padded``: the second
row's last 4 tokens padding, their labels -100) and ``use_cache`` (the
config's default, True, or False) where the family has them."""

from __future__ import annotations

import torch

from eager_models import FAMILIES, _built, _ids, _quiet_transformers

_LM = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, vocab_size=128,
           max_position_embeddings=32)


def _pixels(device: str) -> dict:
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(2, 3, 32, 32, generator=g).to(device),
            "labels": torch.randint(0, 10, (2,), generator=g).to(device)}


def _lm(model_class: str, config_class: str, **config):
    def make(device: str):
        tf = _quiet_transformers()
        cfg = getattr(tf, config_class)(**config)
        model = _built(device, lambda: getattr(tf, model_class)(cfg))
        ids = _ids(device, 128)
        return model, {"input_ids": ids, "labels": ids}

    return make


def _vision(model_class: str, config_class: str, **config):
    def make(device: str):
        tf = _quiet_transformers()
        cfg = getattr(tf, config_class)(**config)
        return _built(device, lambda: getattr(tf, model_class)(cfg)), _pixels(device)

    return make


def bart(device: str):
    tf = _quiet_transformers()
    cfg = tf.BartConfig(encoder_layers=2, decoder_layers=2, d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=128,
                        encoder_attention_heads=4, decoder_attention_heads=4, vocab_size=128,
                        max_position_embeddings=32, pad_token_id=1, decoder_start_token_id=2)
    model = _built(device, lambda: tf.BartForConditionalGeneration(cfg))
    return model, {"input_ids": _ids(device, 128), "labels": _ids(device, 128, (2, 8))}


def clip(device: str):
    tf = _quiet_transformers()
    cfg = tf.CLIPConfig(text_config=dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                         num_attention_heads=4, vocab_size=128, max_position_embeddings=32),
                        vision_config=dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                           num_attention_heads=4, image_size=32, patch_size=8),
                        projection_dim=32)
    model = _built(device, lambda: tf.CLIPModel(cfg))  # the contrastive loss of both towers
    return model, {"input_ids": _ids(device, 128), "pixel_values": _pixels(device)["pixel_values"],
                   "return_loss": True}


def whisper(device: str):
    tf = _quiet_transformers()
    cfg = tf.WhisperConfig(encoder_layers=2, decoder_layers=2, d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=128,
                           encoder_attention_heads=4, decoder_attention_heads=4, vocab_size=128, num_mel_bins=16,
                           max_source_positions=32, max_target_positions=32, pad_token_id=0,
                           decoder_start_token_id=1)
    model = _built(device, lambda: tf.WhisperForConditionalGeneration(cfg))  # 1-d convolutions over mel bins
    features = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(0)).to(device)
    return model, {"input_features": features, "labels": _ids(device, 128, (2, 8))}


def wav2vec2(device: str):
    tf = _quiet_transformers()
    cfg = tf.Wav2Vec2Config(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                            conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_feat_extract_layers=2,
                            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, num_labels=4,
                            classifier_proj_size=32, layerdrop=0.0, mask_time_prob=0.0)
    # Audio classification: 1-d convolutions over the waveform, then the
    # encoder. LayerDrop and SpecAugment, off here, draw random numbers the
    # step branches on (peakmem names the line); the CTC head's loss has no
    # meta kernel (peakmem names the op).
    model = _built(device, lambda: tf.Wav2Vec2ForSequenceClassification(cfg))
    g = torch.Generator().manual_seed(0)
    audio = torch.randn(2, 1600, generator=g).to(device)
    return model, {"input_values": audio, "labels": torch.randint(0, 4, (2,), generator=g).to(device)}


ZOO = {
    "mistral": _lm("MistralForCausalLM", "MistralConfig", **_LM, num_key_value_heads=2, pad_token_id=0),
    "qwen2": _lm("Qwen2ForCausalLM", "Qwen2Config", **_LM, num_key_value_heads=2, pad_token_id=0),
    "phi3": _lm("Phi3ForCausalLM", "Phi3Config", **_LM, num_key_value_heads=2, pad_token_id=0),
    "gemma": _lm("GemmaForCausalLM", "GemmaConfig", **_LM, num_key_value_heads=2, head_dim=16, pad_token_id=0),
    "opt": _lm("OPTForCausalLM", "OPTConfig", num_hidden_layers=2, hidden_size=64, ffn_dim=128,
               num_attention_heads=4, vocab_size=128, max_position_embeddings=32, word_embed_proj_dim=64,
               pad_token_id=0),
    "gpt_neox": _lm("GPTNeoXForCausalLM", "GPTNeoXConfig", **_LM),
    "falcon": _lm("FalconForCausalLM", "FalconConfig", num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                  vocab_size=128),
    "roberta": _lm("RobertaForMaskedLM", "RobertaConfig", **_LM, pad_token_id=0),
    "distilbert": _lm("DistilBertForMaskedLM", "DistilBertConfig", n_layers=2, dim=64, hidden_dim=128, n_heads=4,
                      vocab_size=128, max_position_embeddings=32, pad_token_id=0),
    "electra": _lm("ElectraForMaskedLM", "ElectraConfig", **_LM, embedding_size=64, pad_token_id=0),
    "bart": bart,
    # Mixture of experts, transformers 5.25's default experts kernel on the
    # CPU: torch._grouped_mm over the tokens sorted by expert, whose meta
    # function takes bf16 only where the CPU kernel runs float32 too
    # (peakmem.step.cpu_outputs). Its "eager" kernel routes by nonzero of
    # the router's choice: test_moe_routing.py.
    "mixtral": _lm("MixtralForCausalLM", "MixtralConfig", **_LM, num_key_value_heads=2, num_local_experts=4,
                   num_experts_per_tok=2, pad_token_id=0),
    "deit": _vision("DeiTForImageClassification", "DeiTConfig", num_hidden_layers=2, hidden_size=64,
                    intermediate_size=128, num_attention_heads=4, image_size=32, patch_size=8, num_labels=10),
    "swin": _vision("SwinForImageClassification", "SwinConfig", image_size=32, patch_size=4, embed_dim=16,
                    depths=[1, 1], num_heads=[2, 2], window_size=4, num_labels=10),
    "resnet": _vision("ResNetForImageClassification", "ResNetConfig", embedding_size=16, hidden_sizes=[16, 32],
                      depths=[1, 1], num_labels=10),
    "convnext": _vision("ConvNextForImageClassification", "ConvNextConfig", num_channels=3, patch_size=4,
                        num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=10, image_size=32),
    "gpt_neo": _lm("GPTNeoForCausalLM", "GPTNeoConfig", num_layers=2, hidden_size=64, num_heads=4, vocab_size=128,
                   max_position_embeddings=32, attention_types=[[["global", "local"], 1]], window_size=8),
    "bloom": _lm("BloomForCausalLM", "BloomConfig", n_layer=2, hidden_size=64, n_head=4, vocab_size=128),
    "qwen3": _lm("Qwen3ForCausalLM", "Qwen3Config", **_LM, num_key_value_heads=2, head_dim=16, pad_token_id=0),
    "clip": clip,
    "whisper": whisper,
    "wav2vec2": wav2vec2,
}

ALL = {**FAMILIES, **ZOO}
_CAUSAL = {"gpt2", "llama", "mistral", "qwen2", "phi3", "gemma", "opt", "gpt_neox", "falcon", "mixtral", "gpt_neo",
           "bloom", "qwen3"}
_MASKED = {"bert", "roberta", "distilbert", "electra"}
_SEQ2SEQ = {"t5", "bart"}
KIND = {f: ("causal" if f in _CAUSAL else "masked" if f in _MASKED else "seq2seq" if f in _SEQ2SEQ
            else "contrastive" if f == "clip" else "speech" if f in ("whisper", "wav2vec2") else "vision")
        for f in ALL}
# Families without attention (convolutions only): one way.
_NO_ATTENTION = {"resnet", "convnext"}


def variants(family: str) -> list[tuple[str, str | None, bool | None]]:
    """(attention, mask, use_cache) of each way `family`'s step is taken."""
    kind = KIND[family]
    attentions = ["sdpa"] if family in _NO_ATTENTION else ["sdpa", "eager"]
    masks = [None, "ones", "padded"] if kind in ("causal", "masked", "seq2seq", "contrastive") else [None]
    caches = [None, False] if kind in ("causal", "seq2seq") else [None]
    return [(a, m, c) for a in attentions for m in masks for c in caches]


def variant(family: str, device: str, attention: str = "sdpa", mask: str | None = None,
            use_cache: bool | None = None):
    """`family`'s (model, kwargs), the model on `device`, its step taken the
    way the arguments say (``variants``). The integer inputs (ids, mask,
    labels) are real CPU tensors on either device, as a user sizing a meta
    model has the batch; floating-point ones are on `device`."""
    model = ALL[family](device)[0]
    _, kwargs = ALL[family]("cpu")
    kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
              for k, v in kwargs.items()}
    if attention != "sdpa":
        model.set_attn_implementation(attention)
    if mask is not None:
        ids = kwargs["input_ids"]
        attention_mask = torch.ones(ids.shape, dtype=torch.long)
        if mask == "padded":
            attention_mask[1, -4:] = 0
            if kwargs.get("labels") is not None and kwargs["labels"].shape == ids.shape:
                kwargs["labels"] = kwargs["labels"].clone()
                kwargs["labels"][1, -4:] = -100
        kwargs["attention_mask"] = attention_mask
    if use_cache is not None:
        kwargs["use_cache"] = use_cache
    return model, kwargs
