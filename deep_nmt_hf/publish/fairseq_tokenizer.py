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
* subword-nmt 0.1 codes (no `#version: 0.2` header; subword_nmt/apply_bpe.py applies them with 0.1's rules, `</w>`
  a symbol of its own that a merge may join or leave, a lone one dropped at the word's end): the rules in Python
  before a word-level tokenizer over the same re-keyed dictionary (model/tokenization_bpe01.py's
  `FairseqBPE01Tokenizer`, the codes shipped as its `subword_nmt_01.codes` file); the decoder joins a word's pieces. Pieces the
  dictionary lacks are `<unk>` (3) directly.
* fastBPE (fairseq/data/encoders/fastbpe.py: `fastBPE.apply`; codes `A B COUNT`, fastBPE/fastBPE.hpp): the same
  BPE model as subword-nmt's (characters, `</w>` on the last, merges by rank, `@@ ` after non-final pieces); fastBPE
  splits on spaces only, where the tokenizer splits on any whitespace.
* gpt2 byte-level BPE (fairseq/data/encoders/gpt2_bpe.py: `" ".join(map(str, bpe.encode(x)))`, gpt2_bpe_utils.py;
  decoding maps the ids back to bytes): GPT-2's regex split and byte-level BPE with the merges of `vocab.bpe`, each
  piece given the id of its GPT-2 id's decimal string in the fairseq dictionary (`encoder.json` maps pieces to
  GPT-2 ids); the decoder turns pieces back into bytes.
* Without any of them the tokenizer looks the (already segmented) pieces up as they stand.

Pieces the segmentation makes but the dictionary lacks get ids past the model's vocabulary (`unknown_to_unk`).

Moses tokenisation (fairseq's `--tokenizer moses`), when asked for: the same tokenizer as `FairseqMosesTokenizer`
(model/tokenization_moses.py), which runs sacremoses before it and after decoding.

What differs from fairseq: no truecasing; subword-nmt's `--glossaries` and vocabulary filter (`apply_bpe.py --vocabulary`) are not
reproduced; sentencepiece's sampling (`--sentencepiece-enable-sampling`, training only) is not either.
"""

from __future__ import annotations

import json
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


SUBWORD_NMT = "subword-nmt"
SUBWORD_NMT_01 = "subword-nmt 0.1"
FASTBPE = "fastBPE"


def codes_format(codes: Path) -> str:
    """Which BPE wrote `codes`: subword-nmt 0.2 (`#version: 0.2` first, then `A B` lines), fastBPE (`A B COUNT`
    lines, fastBPE/fastBPE.hpp `readCodes`) or subword-nmt 0.1 (`A B` lines without a header, or `#version: 0.1`:
    subword_nmt/apply_bpe.py reads a headerless file as 0.1). 0.2 and fastBPE split a word into characters with
    `</w>` on the last one and merge by rank, so one BPE model reproduces both; 0.1 keeps `</w>` a symbol of its
    own (model/tokenization_bpe01.py). ValueError for another version or a first line that is no merge."""
    with codes.open(encoding="utf-8") as file:
        first = file.readline()
        second = file.readline()
    if first.startswith("#version:"):
        version = first.split()[-1].rstrip("0").rstrip(".")
        if version not in ("0.1", "0.2"):
            raise ValueError(
                f"{codes} is subword-nmt codes of version {first.split()[-1]}; versions 0.1 and 0.2 are reproduced"
            )
        return SUBWORD_NMT if version == "0.2" else SUBWORD_NMT_01
    fields = first.split()
    if len(fields) == 3 and fields[2].isdigit() and (not second.strip() or len(second.split()) == 3):
        return FASTBPE
    if len(first.strip("\r\n ").split(" ")) == 2:
        return SUBWORD_NMT_01
    raise ValueError(
        f"{codes} is no BPE codes file the converter reads: its first line {first.rstrip()!r} is neither a "
        "'#version:' header (subword-nmt 0.2), an 'A B' merge (subword-nmt 0.1, no header) nor an 'A B COUNT' one "
        "(fastBPE)"
    )


def _merges(codes: Path) -> list[tuple[str, str]]:
    """The merges of subword-nmt 0.2 or fastBPE codes in rank order; ValueError for 0.1 codes (their rules are
    not a merged model's: `build_tokenizer` applies them with `FairseqBPE01Tokenizer`)."""
    kind = codes_format(codes)
    if kind == SUBWORD_NMT_01:
        raise ValueError(
            f"{codes} has no '#version: 0.2' header: subword-nmt 0.1 codes, whose end-of-word rule ('</w>' a symbol "
            "of its own) a merged BPE model cannot reproduce; give 0.2 codes (subword-nmt >= 0.2) or fastBPE's"
        )
    width, shape = (2, "'A B'") if kind == SUBWORD_NMT else (3, "'A B COUNT'")
    merges = []
    for number, line in enumerate(codes.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or (number == 1 and line.startswith("#version")):
            continue
        fields = line.split()
        if len(fields) != width:
            raise ValueError(f"{codes}:{number} is not a {kind} merge ({shape}): {line!r}")
        merges.append((fields[0], fields[1]))
    return merges


def build_tokenizer(
    symbols: list[str],
    codes: Path | None,
    sentencepiece_model: Path | None = None,
    moses: dict[str, Any] | None = None,
    gpt2: tuple[Path, Path] | None = None,
) -> PreTrainedTokenizerFast:
    """A fast tokenizer with fairseq's ids (`symbols` in dictionary order, the four specials first), splitting
    raw text by subword-nmt `codes` or a `sentencepiece_model` (at most one of them); with `moses` (the
    `FairseqMosesTokenizer` options: `moses_source_lang`, `moses_target_lang`, `moses_dash_splits`,
    `moses_escape`) Moses tokenisation before and detokenisation after, as fairseq's `--tokenizer moses`; with
    `gpt2` (fairseq's `encoder.json`, `vocab.bpe`) GPT-2's byte-level BPE instead of either."""
    specials = symbols[:4]  # <s>, <pad>, </s>, <unk>
    word_join = None  # without BPE: tokens joined by spaces
    if codes is not None and codes_format(codes) == SUBWORD_NMT_01:
        return _subword_nmt_01(symbols, codes, moses)
    if gpt2 is not None:
        return _wrap(gpt2_tokenizer(symbols, *gpt2), specials, moses)
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
        model, word_join = bpe_model(_internal_vocab(symbols), codes, specials[3])
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if word_join is not None:
        tokenizer.decoder = word_join
    return _wrap(tokenizer, specials, moses)


def _internal_vocab(symbols: list[str]) -> dict[str, int]:
    """The dictionary re-keyed in subword-nmt's internal form (`_internal`), the specials as they are."""
    vocab: dict[str, int] = {}
    for i, symbol in enumerate(symbols):
        key = symbol if i < 4 else _internal(symbol)
        if key in symbols[:4] and key in vocab:
            continue  # the specials keep ids 0-3 (fairseq's unk_index stays 3)
        vocab[key] = i  # listed twice (#fairseq:overwrite): the text maps to the later id, as in fairseq
    return vocab


def _subword_nmt_01(symbols: list[str], codes: Path, moses: dict[str, Any] | None) -> PreTrainedTokenizerFast:
    """fairseq's ids with subword-nmt 0.1 `codes`: `FairseqBPE01Tokenizer` (model/tokenization_bpe01.py) over a
    word-level model of the re-keyed dictionary, Moses before it where `moses` gives its options. ValueError
    naming a line of `codes` that is no merge."""
    from ..model.tokenization_bpe01 import FairseqBPE01Tokenizer, read_codes_01
    from ..model.tokenization_moses import MOSES_OPTIONS

    read_codes_01(codes)  # a bad line is named now, not at the first sentence
    moses = None if moses is None else {**MOSES_OPTIONS, **moses}  # named: they switch Moses on
    tokenizer = Tokenizer(models.WordLevel(_internal_vocab(symbols), unk_token=symbols[3]))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)
    return _wrap(tokenizer, symbols[:4], moses, FairseqBPE01Tokenizer, bpe_codes_file=str(codes))


def bpe_model(vocab: dict[str, int], codes: Path, unk: str) -> tuple[models.BPE, decoders.BPEDecoder]:
    """subword-nmt's BPE over `vocab` (pieces in subword-nmt's internal form -> ids) with the merges of `codes`,
    and its decoder. tokenizers needs every piece a merge reads or makes in its vocabulary; those the vocabulary
    lacks (fairseq and zero look them up as <unk>) get ids past the model's vocabulary, which
    `pipeline("translation")` reads as <unk> (model/translation_pipeline.py); `unknown_to_unk` does it for direct
    calls. ValueError for a codes file that is neither subword-nmt 0.2's nor fastBPE's (`codes_format`)."""
    merges = _merges(codes)
    for left, right in merges:
        for piece in (left, right, left + right):
            vocab.setdefault(piece, len(vocab))
    model = models.BPE(vocab=vocab, merges=merges, unk_token=unk, end_of_word_suffix=END_OF_WORD)
    return model, decoders.BPEDecoder(suffix=END_OF_WORD)


def _wrap(
    tokenizer: Tokenizer,
    specials: list[str],
    moses: dict[str, Any] | None = None,
    wrapper: type[PreTrainedTokenizerFast] | None = None,
    **options: Any,
) -> PreTrainedTokenizerFast:
    """`</s>` appended after each sequence, as fairseq's `encode_line` does; the specials named; Moses around it
    when `moses` gives its options; `wrapper` (with its keyword `options`) instead of the plain or Moses class."""
    eos = specials[2]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, 2)]
    )
    if wrapper is None:
        wrapper = PreTrainedTokenizerFast
        if moses is not None:
            from ..model.tokenization_moses import FairseqMosesTokenizer

            wrapper = FairseqMosesTokenizer
    wrapped = wrapper(
        **(moses or {}),
        **options,
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


def gpt2_tokenizer(symbols: list[str], encoder_json: Path, vocab_bpe: Path) -> Tokenizer:
    """fairseq's `--bpe gpt2` (data/encoders/gpt2_bpe.py, gpt2_bpe_utils.py `Encoder`) over a fairseq dictionary
    whose symbols are GPT-2 ids written in decimal: GPT-2's regex split and byte-level BPE (the merges of
    `vocab_bpe`, its first line a version header, as `get_encoder` reads it), each piece under the dictionary id of
    `str(encoder_json[piece])`; pieces the dictionary lacks (fairseq: `<unk>`) get ids past the model's vocabulary.
    ValueError naming a file that is not GPT-2's."""
    try:
        encoder = json.loads(encoder_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(
            f"{encoder_json} is not GPT-2's encoder.json (a JSON object piece -> id): {err}"
        ) from None
    if not isinstance(encoder, dict) or not all(isinstance(i, int) for i in encoder.values()):
        raise ValueError(f"{encoder_json} is not GPT-2's encoder.json (a JSON object piece -> id)")
    merges = []
    for number, line in enumerate(vocab_bpe.read_text(encoding="utf-8").split("\n")[1:-1], 2):
        pair = tuple(line.split())
        if len(pair) != 2:
            raise ValueError(f"{vocab_bpe}:{number} is not a GPT-2 merge ('A B'): {line!r}")
        merges.append(pair)
    index: dict[str, int] = {}
    for i, symbol in enumerate(symbols):
        if i >= 4 or symbol not in index:
            index[symbol] = i  # listed twice (#fairseq:overwrite): the later id, as fairseq's index
    vocab = {symbol: i for i, symbol in enumerate(symbols[:4])}
    past = len(symbols)
    for piece, gpt2_id in sorted(encoder.items(), key=lambda item: item[1]):
        fairseq_id = index.get(str(gpt2_id))
        if fairseq_id is None or fairseq_id < 4:
            fairseq_id, past = past, past + 1
        vocab[piece] = fairseq_id
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=symbols[3]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


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
