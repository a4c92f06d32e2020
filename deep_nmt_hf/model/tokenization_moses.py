"""A converted fairseq model's tokenizer with Moses tokenisation around it, as fairseq's `--tokenizer moses` does.

fairseq's hub interface (fairseq 0.12.3.1, fairseq/hub_utils.py:246-254) encodes raw text as tokenize → BPE →
dictionary ids and decodes as ids → text → remove BPE → detokenize. Its Moses tokenizer
(fairseq/data/encoders/moses_tokenizer.py):

* lines 33-34: sacremoses' `MosesTokenizer(source_lang)` and `MosesDetokenizer(target_lang)`;
* lines 40-46: `encode(x)` = `tokenize(x, aggressive_dash_splits=not moses_no_dash_splits, return_str=True,
  escape=not moses_no_escape)` — no punctuation normalisation, no truecasing;
* lines 48-49: `decode(x)` = `detokenize(x.split())`.

`FairseqMosesTokenizer` is the converted fast tokenizer (fairseq's ids, subword-nmt or sentencepiece splitting:
publish/fairseq_tokenizer.py) with those two steps before encoding and after decoding. Transformers' own
`FSMTTokenizer` is not used: before tokenising it applies Moses's `replace-unicode-punctuation`, punctuation
normaliser and `remove-non-printing-char` (tokenization_fsmt.py `moses_pipeline`), which fairseq's hub does not
(`"pani".` becomes `"pani."` in English, `’` becomes `'`), and it fixes dash splitting and escaping on.

`MosesMixin` is that Moses handling, written once: `FairseqMosesTokenizer` (one vocabulary) and
`PairedTokenizerFast` (model/tokenization_paired.py, two vocabularies: Moses with the source language before the
source vocabulary, the target language's detokeniser after the target one) both use it.

This file ships in each converted Moses folder (remote code: `AutoTokenizer.from_pretrained(DIR,
trust_remote_code=True)` loads it without deep_nmt_hf), so it imports transformers only (sacremoses inside methods).
publish/fairseq_moses.py re-exports it under its former name.
"""

from __future__ import annotations

import importlib
from typing import Any

from transformers import PreTrainedTokenizerFast

MOSES_OPTIONS = {
    "moses_source_lang": "en",
    "moses_target_lang": "en",
    "moses_dash_splits": True,
    "moses_escape": True,
}


class MosesMixin:
    """fairseq's Moses steps around a fast tokenizer (put before `PreTrainedTokenizerFast` in the bases): sacremoses'
    tokenisation before encoding (`_encode_plus`) and detokenisation after `_decode`, with the options
    (`MOSES_OPTIONS`) read from the tokenizer's keyword arguments; off where `moses_enabled()` says so."""

    init_kwargs: dict[str, Any]

    def moses_enabled(self) -> bool:
        """Whether the Moses steps run (always here; `PairedTokenizerFast`: where its options name a language)."""
        return True

    def moses_options(self) -> dict[str, Any]:
        """The Moses options this tokenizer was built with (defaults: fairseq's)."""
        return {key: self.init_kwargs.get(key, default) for key, default in MOSES_OPTIONS.items()}

    def _sacremoses(self, kind: str, lang: str) -> Any:
        """sacremoses' MosesTokenizer or MosesDetokenizer (`kind`) for `lang`, made on first use."""
        cache = self.__dict__.setdefault("_moses_cache", {})
        if (kind, lang) not in cache:
            try:  # importlib: sacremoses is needed by Moses folders only, not by every model this folder ships in
                sacremoses = importlib.import_module("sacremoses")
            except ImportError:
                raise ImportError(
                    "this tokenizer (a fairseq model converted with Moses tokenisation) needs the sacremoses "
                    "package: pip install sacremoses (or deep_nmt_hf[convert])"
                ) from None
            cache[(kind, lang)] = getattr(sacremoses, kind)(lang=lang)
        return cache[(kind, lang)]

    def _moses_pair(self) -> tuple[Any, Any]:
        """fairseq's pair (moses_tokenizer.py:33-34): the source language's tokenizer, the target's detokenizer."""
        options = self.moses_options()
        return (
            self._sacremoses("MosesTokenizer", options["moses_source_lang"]),
            self._sacremoses("MosesDetokenizer", options["moses_target_lang"]),
        )

    # `tokenizer(text_target=...)` (labels for fine-tuning) switches to the target side: the target language's rules,
    # as the training targets were tokenised (fairseq's hub tokenises sources only)
    def _switch_to_target_mode(self) -> None:
        self.__dict__["_moses_side"] = "moses_target_lang"

    def _switch_to_input_mode(self) -> None:
        self.__dict__["_moses_side"] = "moses_source_lang"

    def moses_tokenize(self, text: str) -> str:
        """fairseq's `MosesTokenizer.encode`: the source language's rules (the target's for `text_target`), tokens
        joined by single spaces."""
        options = self.moses_options()
        lang = options[self.__dict__.get("_moses_side", "moses_source_lang")]
        return self._sacremoses("MosesTokenizer", lang).tokenize(
            text,
            aggressive_dash_splits=options["moses_dash_splits"],
            return_str=True,
            escape=options["moses_escape"],
        )

    def moses_detokenize(self, text: str) -> str:
        """fairseq's `MosesTokenizer.decode`: the target language's rules, HTML escapes undone."""
        return self._moses_pair()[1].detokenize(text.split())

    def _tokenized(self, text: Any) -> Any:
        if isinstance(text, str):
            return self.moses_tokenize(text)
        if isinstance(text, (list, tuple)):
            return [self.moses_tokenize(t) if isinstance(t, str) else t for t in text]
        return text

    def _encode_plus(self, text: Any, text_pair: Any = None, *args: Any, **kwargs: Any) -> Any:
        # words given already split are taken as tokenised
        if self.moses_enabled() and not kwargs.get("is_split_into_words", False):
            text, text_pair = self._tokenized(text), self._tokenized(text_pair)
        return super()._encode_plus(text, text_pair, *args, **kwargs)  # type: ignore[misc]

    def _decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str:
        text = super()._decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)  # type: ignore[misc]
        return self.moses_detokenize(text) if self.moses_enabled() else text


class FairseqMosesTokenizer(MosesMixin, PreTrainedTokenizerFast):
    """fairseq's `--tokenizer moses` (sacremoses) before the BPE and fairseq's ids, Moses detokenisation after.

    Its options (`MOSES_OPTIONS`, keyword arguments saved in tokenizer_config.json): the source and target languages,
    aggressive dash splits (fairseq's `not moses_no_dash_splits`) and HTML escaping (`not moses_no_escape`). No
    `__init__` of its own: Transformers 5 then loads tokenizer.json as it stands (it rebuilds a class that has one
    from the bare vocabulary)."""

    _auto_class = "AutoTokenizer"  # save_pretrained copies this file and writes the auto_map

    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> FairseqMosesTokenizer:
        tokenizer = super().from_pretrained(*args, **kwargs)
        tokenizer._moses_pair()  # sacremoses is needed at load, as for stock FSMT
        return tokenizer


__all__ = ["MOSES_OPTIONS", "FairseqMosesTokenizer", "MosesMixin"]
