"""Two vocabularies, one tokenizer: `PairedTokenizerFast` encodes with the source vocabulary and decodes with the
target one, as Marian's and FSMT's tokenizers do for a model whose source and target vocabularies differ
(`decoder_vocab_size`; zero's WMT14 En-De models collect subword units on each side, dsinit-merged-attention
sec. 5; fairseq's separate `dict.src.txt` / `dict.tgt.txt`).

A folder holds the source tokenizer at its top (tokenizer.json, tokenizer_config.json) and the target one as a
complete fast tokenizer in `target_tokenizer/`. The class ships with the checkpoint as remote code:
`save_pretrained` copies this file beside the tokenizer and names it in tokenizer_config.json's ``auto_map``
(``AutoTokenizer: [null, "tokenization_paired.PairedTokenizerFast"]``), so that
``AutoTokenizer.from_pretrained(DIR, trust_remote_code=True)`` and ``pipeline("translation", model=DIR,
trust_remote_code=True)`` load it where deep_nmt_hf is not installed. The target's two files are vocabulary files
of the class (`vocab_files_names`, the way Marian names its `target_spm`), so a Hub repository's revision, cache
and subfolder apply to them as to the source's.

Folders written before this class (`deep-nmt convert zero`: `source_tokenizer/` + `target_tokenizer/`, no tokenizer
at the top) load with `PairedTokenizerFast.from_pretrained` too.

With Moses options (`moses_source_lang`, ... as `FairseqMosesTokenizer`'s, model/tokenization_moses.py's
`MosesMixin`) it Moses-tokenises source text with the source language before encoding, target text
(``text_target``) with the target language, and Moses-detokenises with the target language after decoding, as
fairseq's `--tokenizer moses` and zero's Moses-tokenised WMT14 data (dsinit-merged-attention sec. 5) have it.

This module ships with the model code: it imports only transformers, the standard library and
tokenization_moses.py (sacremoses inside its methods, where Moses options are given).
"""

from __future__ import annotations

import os
from typing import Any

from transformers import PreTrainedTokenizerFast

from .tokenization_bpe01 import CODES_FILE, SubwordNMT01Mixin
from .tokenization_moses import MosesMixin

SOURCE_DIR, TARGET_DIR = "source_tokenizer", "target_tokenizer"


class PairedTokenizerFast(MosesMixin, SubwordNMT01Mixin, PreTrainedTokenizerFast):
    """Encode with the source vocabulary (this tokenizer's own backend), decode with the target one
    (`target_tokenizer`); ``text_target=`` encodes with the target. Moses around it where its options name a
    source language (`moses_enabled`); subword-nmt 0.1 BPE before both vocabularies where the folder holds its
    codes (`subword_nmt_01.codes`, model/tokenization_bpe01.py: fairseq applies one codes file to both sides)."""

    vocab_files_names = {
        **PreTrainedTokenizerFast.vocab_files_names,
        "bpe_codes_file": CODES_FILE,
        "target_tokenizer_file": f"{TARGET_DIR}/tokenizer.json",
        "target_tokenizer_config_file": f"{TARGET_DIR}/tokenizer_config.json",
    }
    _target: PreTrainedTokenizerFast | None = None

    @classmethod
    def pair(
        cls,
        source: PreTrainedTokenizerFast,
        target: PreTrainedTokenizerFast,
        moses: dict[str, Any] | None = None,
    ) -> PairedTokenizerFast:
        """The paired tokenizer of two fast tokenizers (the source's backend, specials and length limit, its
        subword-nmt 0.1 codes if it has them: `SubwordNMT01Mixin`); `moses`: the Moses options (`MOSES_OPTIONS`'
        keys) to tokenise before and detokenise after. The target is kept as a plain fast tokenizer of its
        backend (its decoder joins the pieces; 0.1 BPE for target text runs here)."""
        codes = source.init_kwargs.get("bpe_codes_file")
        if type(target) is not PreTrainedTokenizerFast:
            target = PreTrainedTokenizerFast(**_backend_arguments(target))
        paired = cls(
            **(moses or {}),
            **({"bpe_codes_file": codes} if codes else {}),
            **_backend_arguments(source),
        )
        paired._target = target
        if moses is not None:
            paired._moses_pair()  # sacremoses: an ImportError naming it now, not at the first sentence
        return paired

    def moses_enabled(self) -> bool:
        """Whether Moses runs around the vocabularies: where the options name a source language."""
        return "moses_source_lang" in self.init_kwargs

    @classmethod
    def from_pretrained(
        cls, pretrained_model_name_or_path: str | os.PathLike, *args: Any, **kwargs: Any
    ) -> Any:
        """A folder or Hub repository with the source tokenizer at its top and `target_tokenizer/`; or a local
        folder of the first layout (`source_tokenizer/` + `target_tokenizer/`, nothing at the top)."""
        folder = os.fspath(pretrained_model_name_or_path)
        if (
            os.path.isdir(os.path.join(folder, SOURCE_DIR))
            and os.path.isdir(os.path.join(folder, TARGET_DIR))
            and not os.path.isfile(os.path.join(folder, "tokenizer.json"))
        ):
            return cls.pair(
                PreTrainedTokenizerFast.from_pretrained(os.path.join(folder, SOURCE_DIR)),
                PreTrainedTokenizerFast.from_pretrained(os.path.join(folder, TARGET_DIR)),
            )
        tokenizer = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        tokenizer.target_tokenizer  # noqa: B018 (read now: a folder without it fails here, not at decoding)
        if tokenizer.moses_enabled():
            tokenizer._moses_pair()  # sacremoses is needed at load, as for FairseqMosesTokenizer
        if tokenizer.bpe01_enabled():
            tokenizer.bpe01_ranks()  # a bad codes file fails at load
        return tokenizer

    @property
    def target_tokenizer(self) -> PreTrainedTokenizerFast:
        """The target vocabulary's tokenizer (read from `target_tokenizer/` on first use)."""
        if self._target is None:
            path = self.init_kwargs.get("target_tokenizer_file")
            if not path or not os.path.isfile(path):
                raise OSError(
                    f"{self.name_or_path or 'this tokenizer'}: no {TARGET_DIR}/tokenizer.json (the target "
                    "vocabulary a PairedTokenizerFast decodes with)"
                )
            self._target = PreTrainedTokenizerFast.from_pretrained(os.path.dirname(path))
        return self._target

    def __call__(
        self,
        text: Any = None,
        text_pair: Any = None,
        text_target: Any = None,
        text_pair_target: Any = None,
        **kwargs,
    ) -> Any:
        """Source text with the source vocabulary; ``text_target`` with the target one (as ``labels`` when both
        are given, as `PreTrainedTokenizerBase.__call__` returns them)."""
        if text_target is None and text_pair_target is None:
            return super().__call__(text, text_pair, **kwargs)
        if self.moses_enabled() and not kwargs.get("is_split_into_words", False):
            self._switch_to_target_mode()  # the target language's Moses rules for target text
            try:
                text_target, text_pair_target = (
                    self._tokenized(text_target),
                    self._tokenized(text_pair_target),
                )
            finally:
                self._switch_to_input_mode()
        if self.bpe01_enabled():
            split = kwargs.get("is_split_into_words", False)
            text_target = self._bpe01_applied(text_target, split)
            text_pair_target = self._bpe01_applied(text_pair_target, split)
        max_target_length = kwargs.pop("max_target_length", None)
        target_kwargs = dict(kwargs)
        if max_target_length is not None:
            target_kwargs["max_length"] = max_target_length
        target = self.target_tokenizer(text_target, text_pair_target, **target_kwargs)
        if text is None:
            return target
        encoding = super().__call__(text, text_pair, **kwargs)
        encoding["labels"] = target["input_ids"]
        return encoding

    def decode(self, token_ids: Any, *args: Any, **kwargs: Any) -> Any:
        text = self.target_tokenizer.decode(token_ids, *args, **kwargs)
        if not self.moses_enabled():
            return text
        return (
            [self.moses_detokenize(t) for t in text]
            if isinstance(text, list)
            else self.moses_detokenize(text)
        )

    def batch_decode(self, sequences: Any, *args: Any, **kwargs: Any) -> list[str]:
        texts = self.target_tokenizer.batch_decode(sequences, *args, **kwargs)
        return [self.moses_detokenize(t) for t in texts] if self.moses_enabled() else texts

    def convert_ids_to_tokens(self, ids: Any, skip_special_tokens: bool = False) -> Any:
        return self.target_tokenizer.convert_ids_to_tokens(ids, skip_special_tokens=skip_special_tokens)

    def save_pretrained(
        self, save_directory: str | os.PathLike, *args: Any, **kwargs: Any
    ) -> tuple[str, ...]:
        """The source tokenizer at the top of `save_directory` (with this file and its ``auto_map``), the target
        one in `target_tokenizer/`. ``push_to_hub=True`` is refused: save, then upload the folder."""
        if kwargs.get("push_to_hub"):
            raise ValueError(
                "PairedTokenizerFast.save_pretrained(push_to_hub=True): save, then upload the folder"
            )
        target = self.target_tokenizer  # before anything is written
        files = super().save_pretrained(save_directory, *args, **kwargs)
        return (*files, *target.save_pretrained(os.path.join(save_directory, TARGET_DIR)))


PairedTokenizerFast.register_for_auto_class("AutoTokenizer")


def load_folder_tokenizer(folder: str | os.PathLike, **kwargs: Any) -> Any:
    """A model folder's tokenizer without remote code: `PairedTokenizerFast` where a local folder holds
    `target_tokenizer/` (either layout), else `AutoTokenizer`'s (`kwargs` passed on to it)."""
    if os.path.isdir(os.path.join(os.fspath(folder), TARGET_DIR)):
        return PairedTokenizerFast.from_pretrained(folder)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, **kwargs)


__all__ = ["SOURCE_DIR", "TARGET_DIR", "PairedTokenizerFast", "load_folder_tokenizer"]


def _backend_arguments(tokenizer: PreTrainedTokenizerFast) -> dict[str, Any]:
    """The keyword arguments that rebuild `tokenizer` as a fast tokenizer of the same backend: its backend, length
    limit, clean-up setting and special tokens."""
    return {
        "tokenizer_object": tokenizer.backend_tokenizer,
        "model_max_length": tokenizer.model_max_length,
        "clean_up_tokenization_spaces": tokenizer.clean_up_tokenization_spaces,
        **{
            name: str(token) for name, token in tokenizer.special_tokens_map.items() if isinstance(token, str)
        },
    }
