"""The tokenizer of a converted fairseq model: fairseq's dictionary ids and its BPE (subword-nmt or
sentencepiece), as a fast tokenizer.

fairseq's pipeline for raw text (fairseq/hub_utils.py `GeneratorHubInterface.encode`): tokenize (Moses, when the
recipe used it), apply BPE, look the pieces up in the dictionary (`<unk>` = 3 for unknown ones), append `</s>` = 2.

* subword-nmt (fairseq/data/encoders/subword_nmt_bpe.py: `process_line`, `@@ ` after every non-final piece of a
  word; decoding `(x + " ").replace("@@ ", "").rstrip()`): whitespace split, a BPE model whose merges are
  subword-nmt's codes and whose vocabulary is the fairseq dictionary re-keyed in subword-nmt's internal form (a
  final piece `ab` is `ab</w>`, a non-final piece `ab@@` is `ab`), so that token ids are fairseq's; the decoder
  joins a word's pieces.
* sentencepiece (fairseq/data/encoders/sentencepiece_bpe.py: `" ".join(sp.EncodeAsPieces(x))`; decoding
  `x.replace(" ", "").replace("\u2581", " ").strip()`): the `.model` file's normalizer and segmentation
  (publish/sentencepiece_model.py), its pieces given the fairseq dictionary's ids; the decoder turns `▁` back
  into spaces (the pipeline strips the ends, as fairseq does).
* Without either the tokenizer looks the (already segmented) pieces up as they stand.

Pieces the segmentation makes but the dictionary lacks get ids past the model's vocabulary (`unknown_to_unk`).

Moses tokenisation (fairseq's `--tokenizer moses`), when asked for: the same tokenizer as `FairseqMosesTokenizer`
(model/tokenization_moses.py), which runs sacremoses before it and after decoding.

What differs from fairseq: no truecasing; subword-nmt's `--glossaries` and vocabulary filter (`apply_bpe.py --vocabulary`) are not
reproduced; sentencepiece's sampling (`--sentencepiece-enable-sampling`, training only) is not either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from .sentencepiece_model import NORMAL, SPACE, bpe_merges, read_sentencepiece_model

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


def build_tokenizer(
    symbols: list[str],
    codes: Path | None,
    sentencepiece_model: Path | None = None,
    moses: dict[str, Any] | None = None,
) -> PreTrainedTokenizerFast:
    """A fast tokenizer with fairseq's ids (`symbols` in dictionary order, the four specials first), splitting
    raw text by subword-nmt `codes` or a `sentencepiece_model` (at most one of them); with `moses` (the
    `FairseqMosesTokenizer` options: `moses_source_lang`, `moses_target_lang`, `moses_dash_splits`,
    `moses_escape`) Moses tokenisation before and detokenisation after, as fairseq's `--tokenizer moses`."""
    specials = symbols[:4]  # <s>, <pad>, </s>, <unk>
    word_join = None  # without BPE: tokens joined by spaces
    if sentencepiece_model is not None:
        tokenizer = _sentencepiece_tokenizer(symbols, sentencepiece_model)
        return _wrap(tokenizer, specials, moses)
    if codes is None:
        pieces = [s for s in symbols[4:] if s.endswith(CONTINUATION)]
        if pieces:
            raise ValueError(
                f"the dictionary holds BPE pieces ({pieces[0]!r}, ...): give --bpe-codes CODES (subword-nmt's codes "
                "file) so that the tokenizer splits raw text as fairseq did"
            )
        pieces = [s for s in symbols[4:] if s.startswith(SPACE)]
        if pieces:
            raise ValueError(
                f"the dictionary holds sentencepiece pieces ({pieces[0]!r}, ...): give --sentencepiece-model "
                "SPM.model (the model fairseq's --sentencepiece-model named) so that the tokenizer splits raw "
                "text as fairseq did"
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
        model, word_join = bpe_model(vocab, codes, specials[3])
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if word_join is not None:
        tokenizer.decoder = word_join
    return _wrap(tokenizer, specials, moses)


def bpe_model(vocab: dict[str, int], codes: Path, unk: str) -> tuple[models.BPE, decoders.BPEDecoder]:
    """subword-nmt's BPE over `vocab` (pieces in subword-nmt's internal form -> ids) with the merges of `codes`,
    and its decoder. tokenizers needs every piece a merge reads or makes in its vocabulary; those the vocabulary
    lacks (fairseq and zero look them up as <unk>) get ids past the model's vocabulary, which
    `pipeline("translation")` reads as <unk> (model/translation_pipeline.py); `unknown_to_unk` does it for direct
    calls. ValueError for a codes file that is not subword-nmt's."""
    merges = _merges(codes)
    for left, right in merges:
        for piece in (left, right, left + right):
            vocab.setdefault(piece, len(vocab))
    model = models.BPE(vocab=vocab, merges=merges, unk_token=unk, end_of_word_suffix=END_OF_WORD)
    return model, decoders.BPEDecoder(suffix=END_OF_WORD)


def _wrap(
    tokenizer: Tokenizer, specials: list[str], moses: dict[str, Any] | None = None
) -> PreTrainedTokenizerFast:
    """`</s>` appended after each sequence, as fairseq's `encode_line` does; the specials named; Moses around it
    when `moses` gives its options."""
    eos = specials[2]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, 2)]
    )
    wrapper: type[PreTrainedTokenizerFast] = PreTrainedTokenizerFast
    if moses is not None:
        from ..model.tokenization_moses import FairseqMosesTokenizer

        wrapper = FairseqMosesTokenizer
    wrapped = wrapper(
        **(moses or {}),
        tokenizer_object=tokenizer,
        bos_token=specials[0],
        pad_token=specials[1],
        eos_token=specials[2],
        unk_token=specials[3],
        model_max_length=1024,
        clean_up_tokenization_spaces=False,
    )
    if moses is not None:
        wrapped._moses_pair()  # sacremoses: an ImportError naming it now, not at the first sentence
    return wrapped


def _sentencepiece_tokenizer(symbols: list[str], path: Path) -> Tokenizer:
    """sentencepiece's normalizer and segmentation (unigram or BPE) with the pieces under fairseq's ids: a piece the
    dictionary lists has its dictionary id; one it lacks an id past the model's vocabulary (fairseq: `<unk>`)."""
    spm = read_sentencepiece_model(path)
    if spm.model_type not in ("unigram", "bpe"):
        raise ValueError(f"{path} is a sentencepiece {spm.model_type!r} model; unigram and bpe ones are read")
    if spm.treat_whitespace_as_suffix or not spm.escape_whitespaces:
        raise ValueError(
            f"{path} was trained with treat_whitespace_as_suffix=true or escape_whitespaces=false; only "
            "sentencepiece's default whitespace handling (a '▁' prefix) is reproduced"
        )
    scores = spm.normal_pieces()
    lowest = min((s for p, s, t in spm.pieces if t == NORMAL), default=0.0)
    # the dictionary in its own order; specials at score 0 (sentencepiece's control pieces), symbols that are
    # no piece (fairseq's madeupwordNNNN fillers, the surface of a character sentencepiece did not know) at the
    # lowest normal score, which keeps the unknown-character score (that score minus 10) where it was
    entries = [(symbol, 0.0 if i < 4 else scores.get(symbol, lowest)) for i, symbol in enumerate(symbols)]
    listed = set(symbols)
    entries += [(piece, score) for piece, score in scores.items() if piece not in listed]
    unk = symbols[3]
    if spm.model_type == "unigram":
        model = models.Unigram(entries, unk_id=3, byte_fallback=spm.byte_fallback)
    else:
        vocab: dict[str, int] = {}
        for i, (symbol, _) in enumerate(entries):
            if i >= 4 or symbol not in vocab:
                vocab[symbol] = i  # a symbol listed twice (#fairseq:overwrite): the later id, as in fairseq
        model = models.BPE(
            vocab=vocab,
            merges=bpe_merges(scores),
            unk_token=unk,
            fuse_unk=True,
            byte_fallback=spm.byte_fallback,
        )
    tokenizer = Tokenizer(model)
    steps = [normalizers.Precompiled(spm.precompiled_charsmap)] if spm.precompiled_charsmap else []
    if spm.remove_extra_whitespaces:  # sentencepiece: spaces only (after the map), not tabs
        steps += [normalizers.Replace(Regex("^ +| +$"), ""), normalizers.Replace(Regex(" {2,}"), " ")]
    if steps:
        tokenizer.normalizer = normalizers.Sequence(steps)
    prepend = "always" if spm.add_dummy_prefix else "never"
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme=prepend, split=False)
    tokenizer.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme=prepend, split=False)
    if spm.user_defined:  # sentencepiece never splits them: matched whole before segmentation
        tokenizer.add_tokens(
            [AddedToken(piece, normalized=False, special=False) for piece in spm.user_defined]
        )
    return tokenizer


def _internal(symbol: str) -> str:
    """subword-nmt's form of a dictionary piece: `ab@@` (non-final) → `ab`, `ab` (final) → `ab</w>`."""
    if symbol.endswith(CONTINUATION) and len(symbol) > len(CONTINUATION):
        return symbol[: -len(CONTINUATION)]
    return symbol + END_OF_WORD


__all__ = ["build_tokenizer", "unknown_to_unk"]
