"""The tokenizer of a converted fairseq model: fairseq's dictionary ids and subword-nmt's BPE, as a fast tokenizer.

fairseq's pipeline for raw text (fairseq/hub_utils.py `GeneratorHubInterface.encode`): tokenize (Moses, when the
recipe used it), apply BPE (fairseq/data/encoders/subword_nmt_bpe.py: subword-nmt's `process_line`, `@@ ` after
every non-final piece of a word), look the pieces up in the dictionary (`<unk>` = 3 for unknown ones), append
`</s>` = 2. Decoding joins the pieces (`(x + " ").replace("@@ ", "").rstrip()`).

Here the same in Hugging Face `tokenizers`: whitespace split, a BPE model whose merges are subword-nmt's codes and
whose vocabulary is the fairseq dictionary re-keyed in subword-nmt's internal form (a final piece `ab` is
`ab</w>`, a non-final piece `ab@@` is `ab`), so that token ids are fairseq's; a `</s>` appended; the decoder joins
a word's pieces. Without BPE codes the tokenizer looks the (already BPE'd) pieces up as they stand.

What differs from fairseq: no Moses tokenisation / detokenisation (give tokenised text, or add sacremoses
yourself), no truecasing; subword-nmt's `--glossaries` and vocabulary filter (`apply_bpe.py --vocabulary`) are not
reproduced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

END_OF_WORD = "</w>"
UNK_ID = 3


def unknown_to_unk(input_ids: Any, vocab_size: int) -> Any:
    """Token ids as fairseq's dictionary gives them: pieces past the model's vocabulary become <unk>."""
    return input_ids.masked_fill(input_ids >= vocab_size, UNK_ID)


CONTINUATION = "@@"


def _merges(codes: Path) -> list[tuple[str, str]]:
    merges = []
    for number, line in enumerate(codes.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or (number == 1 and line.startswith("#version")):
            continue
        pair = line.split()
        if len(pair) != 2:
            raise ValueError(f"{codes}:{number} is not a subword-nmt merge ('A B'): {line!r}")
        merges.append((pair[0], pair[1]))
    return merges


def build_tokenizer(symbols: list[str], codes: Path | None) -> PreTrainedTokenizerFast:
    """A fast tokenizer with fairseq's ids (`symbols` in dictionary order, the four specials first)."""
    specials = symbols[:4]  # <s>, <pad>, </s>, <unk>
    word_join = None  # without BPE: tokens joined by spaces
    if codes is None:
        pieces = [s for s in symbols[4:] if s.endswith(CONTINUATION)]
        if pieces:
            raise ValueError(
                f"the dictionary holds BPE pieces ({pieces[0]!r}, ...): give --bpe-codes CODES (subword-nmt's codes "
                "file) so that the tokenizer splits raw text as fairseq did"
            )
        vocab: dict[str, int] = {}
        for i, symbol in enumerate(symbols):
            if symbol in specials and symbol in vocab:
                continue  # the specials keep ids 0-3
            vocab[symbol] = i  # a symbol listed twice: the later id, as fairseq's index
        model = models.WordLevel(vocab, unk_token=specials[3])
    else:
        vocab = {}
        for i, symbol in enumerate(symbols):
            key = symbol if i < 4 else _internal(symbol)
            if key in specials and key in vocab:
                continue  # the specials keep ids 0-3 (fairseq's unk_index stays 3)
            vocab[key] = i  # listed twice (#fairseq:overwrite): the text maps to the later id, as in fairseq
        merges = _merges(codes)
        # tokenizers needs every piece a merge reads or makes in its vocabulary; those the dictionary lacks
        # (fairseq looks them up as <unk>) get ids past the model's vocabulary, which `pipeline("translation")`
        # reads as <unk> (model/translation_pipeline.py); `unknown_to_unk` does it for direct calls
        for left, right in merges:
            for piece in (left, right, left + right):
                vocab.setdefault(piece, len(vocab))
        model = models.BPE(vocab=vocab, merges=merges, unk_token=specials[3], end_of_word_suffix=END_OF_WORD)
        word_join = decoders.BPEDecoder(suffix=END_OF_WORD)
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if word_join is not None:
        tokenizer.decoder = word_join
    eos = specials[2]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, 2)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=specials[0],
        pad_token=specials[1],
        eos_token=specials[2],
        unk_token=specials[3],
        model_max_length=1024,
        clean_up_tokenization_spaces=False,
    )


def _internal(symbol: str) -> str:
    """subword-nmt's form of a dictionary piece: `ab@@` (non-final) → `ab`, `ab` (final) → `ab</w>`."""
    if symbol.endswith(CONTINUATION) and len(symbol) > len(CONTINUATION):
        return symbol[: -len(CONTINUATION)]
    return symbol + END_OF_WORD


__all__ = ["build_tokenizer", "unknown_to_unk"]
