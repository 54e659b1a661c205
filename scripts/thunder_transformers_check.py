"""Can Thunder trace a training step of tiny Hugging Face transformers models?

For each family (gpt2, llama, bert, t5, vit, falcon, bloom, gpt_neo) a tiny randomly initialised
model is built from its config and wrapped in an ``nn.Module`` whose
``forward`` returns the model's loss; then ``peakmem.estimate_step`` (Thunder
traces the step) and ``peakmem.measure_step`` (the step run for real on the
CPU) are called with ``optimizer=torch.optim.AdamW``, and one table row per
family says whether the estimate worked and whether its peak and final bytes
equal the measured ones (else the failure's one-line reason).

    .venv/bin/python scripts/thunder_transformers_check.py [--families gpt2,llama,bert,t5,vit]

Other transformers versions, installed beside the venv's own (which is not
touched) with ``pip --target``, are checked by putting them first on
``PYTHONPATH``::

    V=4.57.6
    .venv/bin/pip install --no-deps --target /tmp/tf/$V transformers==$V
    PYTHONPATH=/tmp/tf/$V:$DEPS .venv/bin/python scripts/thunder_transformers_check.py

where ``$DEPS`` holds what that version needs and the venv's newer packages
do not satisfy (transformers checks the versions at import):

* 5.x before about 5.2x: ``huggingface_hub>=1.3,<2`` (with its dependencies,
  httpx among them) and ``tokenizers==0.22.1``, e.g.
  ``pip install --target /tmp/tf/d5 "huggingface_hub>=1.3,<2"`` and
  ``pip install --no-deps --target /tmp/tf/d5 tokenizers==0.22.1``.
* 4.5x: ``huggingface_hub<1.0`` (with requests) and a tokenizers in the
  range that version's ``transformers/dependency_versions_table.py`` names.
* Older transformers (5.0 and 4.x) also break on import against the
  venv's newer ``kernels`` package (``ValueError: Either a revision or a
  version must be specified``); ``--hide kernels`` hides it
  (``sys.modules["kernels"] = None`` before transformers is imported).

Exit status 0 when every family's estimate equals the measurement.
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback

if __name__ == "__main__" and "--hide" in sys.argv:  # before anything below imports it
    for _name in sys.argv[sys.argv.index("--hide") + 1].split(","):
        # find_spec() is None and ``import`` raises ImportError: transformers sees no such package.
        sys.modules[_name] = None

import peakmem  # before anything imports thunder: it patches torch for Thunder 0.2.6
import torch

FAMILIES = ("gpt2", "llama", "bert", "t5", "vit", "falcon", "bloom", "gpt_neo")
BATCH, SEQ, VOCAB = 2, 8, 128


class _LossOf(torch.nn.Module):
    """``forward(*inputs)`` returns ``model(**kwargs(*inputs)).loss``; with
    `outside`, the model gets no labels and the loss is
    ``cross_entropy(logits, labels)`` computed here (the last input is the
    labels) instead of in transformers' code."""

    def __init__(self, model, kwargs, outside=False):
        super().__init__()
        self.model = model
        self._kwargs = kwargs
        self._outside = outside
        self._decoder_inputs = bool(getattr(model.config, "is_encoder_decoder", False))

    def forward(self, *inputs):
        kwargs = self._kwargs(*inputs)
        if not self._outside:
            return self.model(**kwargs).loss
        labels = kwargs.pop("labels")
        if self._decoder_inputs:  # T5 makes them from the labels; given none, it needs them
            kwargs["decoder_input_ids"] = labels
        logits = self.model(**kwargs).logits
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def build(family: str, loss: str = "model", tie: bool = True):
    """Returns ``(wrapper, inputs)`` for `family`'s tiny model (`loss`:
    ``"model"`` or ``"outside"``, see _LossOf; `tie`: GPT-2, BERT, T5,
    Falcon, BLOOM and GPT-Neo tie their embedding and output weights, as
    by default)."""
    outside = loss == "outside"
    import transformers as tf

    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    if family == "gpt2":
        model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB,
                                                 n_positions=32, tie_word_embeddings=tie))
        return _LossOf(model, lambda i: dict(input_ids=i, labels=i), outside), (ids,)
    if family == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(
            num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=32))
        return _LossOf(model, lambda i: dict(input_ids=i, labels=i), outside), (ids,)
    if family == "bert":
        model = tf.BertForMaskedLM(tf.BertConfig(
            num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
            vocab_size=VOCAB, max_position_embeddings=32, tie_word_embeddings=tie))
        return _LossOf(model, lambda i: dict(input_ids=i, labels=i), outside), (ids,)
    if family == "t5":
        model = tf.T5ForConditionalGeneration(tf.T5Config(
            num_layers=2, num_decoder_layers=2, d_model=64, d_ff=128, d_kv=16, num_heads=4,
            vocab_size=VOCAB, decoder_start_token_id=0, tie_word_embeddings=tie))
        labels = torch.randint(0, VOCAB, (BATCH, SEQ))
        return _LossOf(model, lambda i, l: dict(input_ids=i, labels=l), outside), (ids, labels)
    if family == "vit":
        model = tf.ViTForImageClassification(tf.ViTConfig(
            num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
            image_size=32, patch_size=8, num_labels=10,
            # Else ViT picks its loss by ``labels.dtype == torch.long``, which is False for a
            # Thunder proxy's dtype: it would pick binary cross-entropy, which then fails.
            problem_type="single_label_classification"))
        pixels = torch.randn(BATCH, 3, 32, 32)
        labels = torch.randint(0, 10, (BATCH,))
        return _LossOf(model, lambda p, l: dict(pixel_values=p, labels=l), outside), (pixels, labels)
    causal = {  # LM heads tied to the embedding, as by default
        "falcon": lambda: tf.FalconForCausalLM(tf.FalconConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=VOCAB, tie_word_embeddings=tie)),
        "bloom": lambda: tf.BloomForCausalLM(tf.BloomConfig(
            n_layer=2, hidden_size=64, n_head=4, vocab_size=VOCAB, tie_word_embeddings=tie)),
        "gpt_neo": lambda: tf.GPTNeoForCausalLM(tf.GPTNeoConfig(
            num_layers=2, hidden_size=64, num_heads=4, vocab_size=VOCAB, max_position_embeddings=32,
            attention_types=[[["global", "local"], 1]], window_size=8, tie_word_embeddings=tie)),
    }
    if family in causal:
        model = causal[family]()
        labels = torch.randint(0, VOCAB, (BATCH, SEQ))
        return _LossOf(model, lambda i, l: dict(input_ids=i, labels=l, use_cache=False), outside), (ids, labels)
    raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")


def _reason(exc: BaseException) -> str:
    """One line: the exception's type and the first line of its message
    (for peakmem's "could not trace" error, the Thunder error it quotes)."""
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0] if text else ''}"
    if " could not trace the step: " in line:
        line = line.split(" could not trace the step: ", 1)[1].split(". Without Thunder, ", 1)[0]
    inner = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    if not str(inner).strip() and inner.__traceback__ is not None:  # a bare assert: say where
        frame = traceback.extract_tb(inner.__traceback__)[-1]
        line += f" {type(inner).__name__} at {frame.filename.split('site-packages/')[-1]}:{frame.lineno}"
    return line if len(line) <= 200 else line[:197] + "..."


def check(family: str, verbose: bool = False, loss: str = "model", tie: bool = True) -> dict:
    row = {"family": family, "estimate": "-", "peak": "-", "final": "-", "match": False, "reason": ""}
    start = time.perf_counter()
    try:
        torch.manual_seed(0)
        wrapper, inputs = build(family, loss, tie)
        wrapper.train()
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        row["reason"] = "build: " + _reason(exc)
        return row
    try:
        r = peakmem.estimate_step(wrapper, *inputs, optimizer=torch.optim.AdamW, frontend="thunder")
        row["estimate"] = "ok"
    except Exception as exc:  # noqa: BLE001
        row["estimate"] = "FAIL"
        row["reason"] = "estimate: " + _reason(exc)
        if verbose:
            traceback.print_exc()
        row["seconds"] = time.perf_counter() - start
        return row
    try:
        m = peakmem.measure_step(wrapper, *inputs, optimizer=torch.optim.AdamW, frontend="thunder")
    except Exception as exc:  # noqa: BLE001
        row["reason"] = "measure: " + _reason(exc)
        if verbose:
            traceback.print_exc()
        row["seconds"] = time.perf_counter() - start
        return row
    row["peak"] = f"{r.peak_bytes}/{m.peak_bytes}"
    row["final"] = f"{r.final_bytes}/{m.final_bytes}"
    row["match"] = r.peak_bytes == m.peak_bytes and r.final_bytes == m.final_bytes
    if not row["match"]:
        row["reason"] = "estimate != measurement"
    row["seconds"] = time.perf_counter() - start
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated subset of {','.join(FAMILIES)} (default: all)")
    parser.add_argument("--verbose", action="store_true", help="print failures' tracebacks")
    parser.add_argument("--loss", choices=("model", "outside"), default="model",
                        help="model: the model's own loss (it gets labels; the default); outside: "
                             "cross_entropy of its logits, computed in the wrapper")
    parser.add_argument("--untie", action="store_true",
                        help="GPT-2, BERT, T5, Falcon, BLOOM and GPT-Neo without tied input and output "
                             "embeddings")
    parser.add_argument("--hide", default="", metavar="PACKAGES",
                        help="comma-separated packages to make unimportable (and invisible to "
                             "transformers' availability checks), e.g. kernels for older transformers")
    args = parser.parse_args(argv)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    for f in families:
        if f not in FAMILIES:
            parser.error(f"unknown family {f!r}; known: {', '.join(FAMILIES)}")

    import transformers
    import thunder

    print(f"torch {torch.__version__}, lightning-thunder {thunder.__version__}, "
          f"transformers {transformers.__version__} ({transformers.__file__})", flush=True)
    rows = []
    for family in families:
        rows.append(check(family, verbose=args.verbose, loss=args.loss, tie=not args.untie))
        row = rows[-1]
        print(f"  {family}: estimate {row['estimate']}, match {row['match']} "
              f"({row.get('seconds', 0):.1f}s) {row['reason']}", flush=True)

    header = ("family", "estimate", "peak est/meas", "final est/meas", "match", "reason")
    table = [header] + [(r["family"], r["estimate"], r["peak"], r["final"], "yes" if r["match"] else "no",
                         r["reason"]) for r in rows]
    widths = [max(len(str(t[i])) for t in table) for i in range(len(header) - 1)]
    print()
    print(f"transformers {transformers.__version__}, loss {args.loss}" + (", untied embeddings" if args.untie else ""))
    for t in table:
        print("  ".join(str(c).ljust(w) for c, w in zip(t, widths)) + "  " + t[-1])
    return 0 if all(r["match"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
