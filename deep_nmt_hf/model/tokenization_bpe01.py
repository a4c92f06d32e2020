"""subword-nmt 0.1 codes applied as fairseq applies them: `SubwordNMT01Mixin` and `FairseqBPE01Tokenizer`.

A codes file without the `#version: 0.2` header is subword-nmt 0.1's format, and subword-nmt (0.3.8,
subword_nmt/apply_bpe.py `BPE.__init__`, `encode`) applies it with 0.1's rules, which a merged BPE model cannot:

* a word is its characters followed by `</w>` as a symbol of its own (0.2: `</w>` glued to the last character), so
  a merge may join `</w>` or not;
* merges apply by rank (the first line of a pair counts), every non-overlapping occurrence left to right, until no
  pair of the word is a merge;
* a lone `</w>` left at the end is dropped, one glued to the last symbol is cut off; a one-character word is left
  as it stands;
* fairseq's SubwordNMTBPE (fairseq/data/encoders/subword_nmt_bpe.py: separator `@@`, no glossaries, no vocabulary
  filter) calls `process_line`: words are split on spaces only (` `; a tab stays inside its word), empty ones
  skipped, and every non-final piece of a word gets `@@`; fairseq's dictionary (data/dictionary.py `encode_line`)
  then splits the line on any whitespace and looks each piece up (`<unk>` for those it lacks).

The mixin does that in Python before the fast tokenizer (`_encode_plus`), which is a word-level one over fairseq's
dictionary in subword-nmt's internal form (a non-final piece `ab@@` is `ab`, a final `ab` is `ab</w>`): its decoder
(tokenizers' `BPEDecoder` with suffix `</w>`) joins a word's pieces, as fairseq's `(x + " ").replace("@@ ",
"").rstrip()` does. The codes travel in the tokenizer's folder as a vocabulary file (`subword_nmt_01.codes`), so
`AutoTokenizer.from_pretrained(DIR, trust_remote_code=True)` loads them without deep_nmt_hf.

`FairseqBPE01Tokenizer` is the one-vocabulary tokenizer, with fairseq's Moses steps around it (model/
tokenization_moses.py's `MosesMixin`: Moses first, then the 0.1 BPE; decoding joins the pieces, then detokenises)
where its keyword arguments name a Moses language; `PairedTokenizerFast` (model/tokenization_paired.py) uses the
mixin for two vocabularies. This file ships in each converted 0.1 folder (remote code), so it imports only
transformers, the standard library and its siblings.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from transformers import PreTrainedTokenizerFast

from .tokenization_moses import MosesMixin

END_OF_WORD, SEPARATOR = "</w>", "@@"
CODES_FILE = "subword_nmt_01.codes"  # not fairseq's `bpecodes`, which a folder may hold for other reasons


def read_codes_01(path: str | os.PathLike) -> dict[tuple[str, str], int]:
    """The merges of subword-nmt 0.1 codes (`A B` lines, an optional `#version: 0.1` header), pair -> rank, the
    first line of a pair keeping its rank (as apply_bpe.py reads them). ValueError naming the line that is no
    merge, or a header of another version."""
    with open(path, encoding="utf-8") as file:
        lines = file.read().rstrip("\n").split("\n")
    if lines and lines[0].startswith("#version:"):
        version = lines[0].split()[-1]
        if version.rstrip("0").rstrip(".") != "0.1":
            raise ValueError(f"{path} holds subword-nmt {version} codes, not 0.1 codes (no header)")
        lines, offset = lines[1:], 2
    else:
        offset = 1
    ranks: dict[tuple[str, str], int] = {}
    for number, line in enumerate(lines):
        pair = tuple(line.strip("\r\n ").split(" "))
        if len(pair) != 2:
            raise ValueError(f"{path}:{number + offset} is not a subword-nmt merge ('A B'): {line!r}")
        ranks.setdefault(pair, number)  # type: ignore[arg-type]
    return ranks


def segment_word_01(word: str, ranks: dict[tuple[str, str], int]) -> list[str]:
    """subword-nmt 0.1's pieces of one word (without the `@@` separators)."""
    if len(word) == 1:
        return [word]
    symbols = [*word, END_OF_WORD]
    while len(symbols) > 1:
        found = [(ranks[pair], pair) for pair in zip(symbols, symbols[1:], strict=False) if pair in ranks]
        if not found:
            break
        first, second = min(found)[1]  # the best-ranked merge, at every place it occurs
        merged, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
                merged.append(first + second)
                i += 2
            else:
                merged.append(symbols[i])
                i += 1
        symbols = merged
    if symbols[-1] == END_OF_WORD:
        symbols.pop()
    elif symbols[-1].endswith(END_OF_WORD):
        symbols[-1] = symbols[-1][: -len(END_OF_WORD)]
    return symbols


def internal_form(piece: str) -> str:
    """subword-nmt's form of a fairseq piece: `ab@@` (non-final) → `ab`, `ab` (final) → `ab</w>`."""
    if piece.endswith(SEPARATOR) and len(piece) > len(SEPARATOR):
        return piece[: -len(SEPARATOR)]
    return piece + END_OF_WORD


class SubwordNMT01Mixin:
    """subword-nmt 0.1 BPE in Python before a word-level fast tokenizer (put before `PreTrainedTokenizerFast` in the
    bases, after `MosesMixin`): the codes are the vocabulary file `bpe_codes_file` (`subword_nmt_01.codes` in the folder); off
    where the tokenizer has none (`bpe01_enabled`)."""

    vocab_files_names = {**PreTrainedTokenizerFast.vocab_files_names, "bpe_codes_file": CODES_FILE}
    init_kwargs: dict[str, Any]

    def bpe01_enabled(self) -> bool:
        """Whether the 0.1 BPE runs: where the tokenizer was given its codes file."""
        return bool(self.init_kwargs.get("bpe_codes_file"))

    def bpe01_ranks(self) -> dict[tuple[str, str], int]:
        """The codes' merges (read on first use); OSError / ValueError naming a missing or bad codes file."""
        cache = self.__dict__.setdefault("_bpe01", {})
        if "ranks" not in cache:
            path = self.init_kwargs.get("bpe_codes_file")
            if not path or not os.path.isfile(path):
                raise OSError(f"no subword-nmt 0.1 codes file ({CODES_FILE}) for this tokenizer: {path!r}")
            cache["ranks"], cache["words"] = read_codes_01(path), {}
        return cache["ranks"]

    def bpe01_pieces(self, text: str) -> list[str]:
        """fairseq's pieces of `text`: SubwordNMTBPE's `process_line` (`@@` after non-final pieces), split on any
        whitespace as fairseq's dictionary splits it."""
        ranks = self.bpe01_ranks()
        words = self.__dict__["_bpe01"]["words"]
        out = []
        for word in text.strip("\r\n ").split(" "):
            if not word:
                continue
            if word not in words:
                pieces = segment_word_01(word, ranks)
                words[word] = " ".join([p + SEPARATOR for p in pieces[:-1]] + pieces[-1:])
            out.append(words[word])
        return " ".join(out).split()

    def bpe01_encode(self, text: str) -> str:
        """`text` as the word-level tokenizer reads it: fairseq's pieces in subword-nmt's internal form."""
        return " ".join(internal_form(piece) for piece in self.bpe01_pieces(text))

    def _bpe01_applied(self, text: Any, split_into_words: bool) -> Any:
        if isinstance(text, str):
            return self.bpe01_encode(text)
        if isinstance(text, (list, tuple)):
            if split_into_words and all(isinstance(t, str) for t in text):
                # each word's pieces, split again by the tokenizer's whitespace split
                return [self.bpe01_encode(t) for t in text]
            return [self._bpe01_applied(t, split_into_words) for t in text]
        return text

    def _encode_plus(self, text: Any, text_pair: Any = None, *args: Any, **kwargs: Any) -> Any:
        if self.bpe01_enabled():
            split = kwargs.get("is_split_into_words", False)
            text, text_pair = self._bpe01_applied(text, split), self._bpe01_applied(text_pair, split)
        return super()._encode_plus(text, text_pair, *args, **kwargs)  # type: ignore[misc]

    def _save_pretrained(
        self, save_directory: str | os.PathLike, file_names: tuple[str, ...], *args: Any, **kwargs: Any
    ) -> tuple[str, ...]:
        files = super()._save_pretrained(save_directory, file_names, *args, **kwargs)  # type: ignore[misc]
        if not self.bpe01_enabled():
            return files
        source = self.init_kwargs["bpe_codes_file"]
        target = os.path.join(os.fspath(save_directory), CODES_FILE)
        if os.path.abspath(source) != os.path.abspath(target):
            shutil.copyfile(source, target)
        return (*files, target)


class FairseqBPE01Tokenizer(MosesMixin, SubwordNMT01Mixin, PreTrainedTokenizerFast):
    """fairseq's ids with subword-nmt 0.1 codes (`SubwordNMT01Mixin`), Moses around them where the keyword
    arguments name a source language (`MOSES_OPTIONS`, as `FairseqMosesTokenizer`'s). No `__init__` of its own:
    Transformers 5 then loads tokenizer.json as it stands."""

    _auto_class = "AutoTokenizer"  # save_pretrained copies this file and writes the auto_map

    def moses_enabled(self) -> bool:
        """Whether Moses runs before the BPE: where the options name a source language."""
        return "moses_source_lang" in self.init_kwargs

    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> FairseqBPE01Tokenizer:
        tokenizer = super().from_pretrained(*args, **kwargs)
        tokenizer.bpe01_ranks()  # a missing or bad codes file fails at load, not at the first sentence
        if tokenizer.moses_enabled():
            tokenizer._moses_pair()  # sacremoses is needed at load, as for FairseqMosesTokenizer
        return tokenizer


__all__ = ["CODES_FILE", "FairseqBPE01Tokenizer", "SubwordNMT01Mixin", "read_codes_01", "segment_word_01"]
