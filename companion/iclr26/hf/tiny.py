"""Tiny random hub-format models (:func:`write_tiny_model`: GPT-2, Llama, GPT-NeoX, BERT, DINOv2, LLaVA with its
processor), so that a chapter's ``paper``-scale functions run at ``ci`` on the code path a hub model takes."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from iclr26.hf.loading import _quiet_transformers
from iclr26.validate import (
    as_int,
)

__all__ = ["TINY_KINDS", "write_tiny_model"]


TINY_KINDS = ("gpt2", "llama", "gpt_neox", "bert", "dinov2", "llava")
_TINY_WORDS = ["<pad>", "<unk>", "<s>", "<image>", "user", "assistant", ":", ".", "the", "a", "is", "and", "of", "in"]


def _word_tokenizer(words: list[str], *, masked: bool = False) -> Any:
    """A word-level fast tokenizer over ``words`` (split at white space), ids in list order; ``masked``: BERT's
    special tokens (``[PAD]``, ``[UNK]``, ``[CLS]``, ``[SEP]``, ``[MASK]``, which ``words`` must hold) and a
    ``[CLS] … [SEP]`` template, as a masked LM's tokenizer adds them."""
    import tokenizers
    import transformers

    unk = "[UNK]" if masked else "<unk>"
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=unk))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    if not masked:
        return transformers.PreTrainedTokenizerFast(
            tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="."
        )
    ids = {w: words.index(w) for w in ("[CLS]", "[SEP]")}
    tk.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=list(ids.items())
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def write_tiny_model(kind: str, path: str | os.PathLike, *, words: Iterable[str] = (), seed: int = 0) -> Path:
    """Save a tiny random model of ``kind`` (one of :data:`TINY_KINDS`) in ``save_pretrained`` form to the folder
    ``path`` and return it: what :func:`load_pretrained` and :func:`image_features` read in place of a hub model, so a
    ``paper``-scale function runs at ``ci`` (its numbers mean nothing: the weights are random, from ``seed``).

    - ``"gpt2"``, ``"llama"``, ``"gpt_neox"``: a 2-block causal LM (width 16) and a word-level tokenizer;
    - ``"bert"``: a 2-block ``BertForMaskedLM`` (width 16) and a word-level tokenizer with BERT's special tokens
      (``[CLS] … [SEP]`` around each text, ``[MASK]``);
    - ``"dinov2"``: a 1-block DINOv2 (width 32, 32×32 images, patch 8);
    - ``"llava"``: a LLaVA (a 1-block CLIP vision tower on 32×32 images, a 2-block Llama) and its processor, with a
      chat template that writes ``role : <image> text``.

    The tokenizers know a few words and every word of ``words`` (each split at white space); others map to
    ``<unk>``."""
    if not isinstance(kind, str) or kind not in TINY_KINDS:
        raise ValueError(f"kind must be one of {TINY_KINDS}, got {kind!r}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    if isinstance(words, (str, bytes)) or not isinstance(words, Iterable):
        raise TypeError(f"words must be an iterable of strings, got {type(words).__name__}")
    extra = list(words)
    if not all(isinstance(w, str) for w in extra):
        raise TypeError("words must hold strings only")
    seed = as_int(seed, "seed", low=0)
    vocab = list(dict.fromkeys(_TINY_WORDS + [t for w in extra for t in w.split()]))
    folder = Path(path).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    with _quiet_transformers(), torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        _write_tiny(kind, folder, vocab, seed)
    return folder


def _write_tiny(kind: str, folder: Path, vocab: list[str], seed: int) -> None:
    import transformers

    lm = dict(num_hidden_layers=2, hidden_size=16, num_attention_heads=2, intermediate_size=32, vocab_size=len(vocab))
    lm.update(max_position_embeddings=64, bos_token_id=2, eos_token_id=7, pad_token_id=0)
    vision = dict(num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=8)  # DINOv2's and CLIP's
    sizes = dict(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})  # their image processors'
    torch.manual_seed(seed)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(
            n_layer=2, n_embd=16, n_head=2, vocab_size=len(vocab), n_positions=64, bos_token_id=2, eos_token_id=7
        )
        model = transformers.GPT2LMHeadModel(cfg)
    elif kind == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(num_key_value_heads=2, **lm))
    elif kind == "gpt_neox":
        model = transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**lm))
    elif kind == "bert":
        special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        vocab = special + [w for w in vocab if w not in special and w not in ("<pad>", "<unk>")]
        cfg = transformers.BertConfig(
            num_hidden_layers=2, hidden_size=16, num_attention_heads=2, intermediate_size=32, vocab_size=len(vocab)
        )
        cfg.update(dict(max_position_embeddings=64, pad_token_id=0))
        transformers.BertForMaskedLM(cfg).save_pretrained(folder)
        _word_tokenizer(vocab, masked=True).save_pretrained(folder)
        return
    elif kind == "dinov2":
        transformers.Dinov2Model(
            transformers.Dinov2Config(hidden_size=32, intermediate_size=64, **vision)
        ).save_pretrained(folder)
        transformers.BitImageProcessor(**sizes).save_pretrained(folder)
        return
    else:
        tok = _word_tokenizer(vocab)
        tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
        template = (
            "{% for m in messages %}{{ m['role'] }} : {% for c in m['content'] %}{% if c['type'] == 'image' %}"
            "<image> {% else %}{{ c['text'] }} {% endif %}{% endfor %}{% endfor %}"
            "{% if add_generation_prompt %}assistant : {% endif %}"
        )
        image_processor = transformers.CLIPImageProcessor(**sizes)
        processor = transformers.LlavaProcessor(
            image_processor=image_processor,
            tokenizer=tok,
            chat_template=template,
            patch_size=8,
            vision_feature_select_strategy="default",
            num_additional_image_tokens=1,
        )
        text = transformers.LlamaConfig(num_key_value_heads=2, **lm)
        cfg = transformers.LlavaConfig(
            vision_config=transformers.CLIPVisionConfig(hidden_size=16, intermediate_size=32, **vision),
            text_config=text,
            image_token_index=3,
            vision_feature_select_strategy="default",
        )
        transformers.LlavaForConditionalGeneration(cfg).save_pretrained(folder)
        processor.save_pretrained(folder)
        return
    model.save_pretrained(folder)
    _word_tokenizer(vocab).save_pretrained(folder)
