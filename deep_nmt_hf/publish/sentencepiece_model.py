"""A sentencepiece `.model` file read without the sentencepiece package, as `tokenizers` components.

The file is a serialised `ModelProto` (sentencepiece's src/sentencepiece_model.proto): `pieces` (field 1: `piece` 1,
`score` 2, `type` 3), `trainer_spec` (field 2: `model_type` 3, `treat_whitespace_as_suffix` 24, `byte_fallback` 35,
`unk_id` 40), `normalizer_spec` (field 3: `name` 1, `precompiled_charsmap` 2, `add_dummy_prefix` 3,
`remove_extra_whitespaces` 4, `escape_whitespaces` 5). A few lines of protobuf wire format read what is needed; no
new dependency.

sentencepiece's encoding, and its counterpart here (the normalizer: sentencepiece's normalizer.cc; the
segmentation: unigram_model.cc / bpe_model.cc):

* the precompiled character map (`nmt_nfkc` or a custom rule table) → `normalizers.Precompiled`;
* `remove_extra_whitespaces`: no leading or trailing spaces, runs of spaces as one (after the map, spaces only);
* `add_dummy_prefix` and `escape_whitespaces`: a `▁` before the text, every space as `▁` → `Metaspace`, unsplit
  (one lattice over the whole sentence, as sentencepiece has);
* unigram: Viterbi over the pieces' scores, an unknown character at the lowest normal score minus 10, runs of
  unknown characters fused into one piece → `models.Unigram` (the same lattice and penalty);
* BPE: merges from the piece scores (the highest-scoring piece first), as Transformers' own converter derives
  them; a pair that two splits of one piece both make is ranked by its split, where sentencepiece takes the
  leftmost (a tie that real text rarely meets);
* user-defined symbols: matched whole before segmentation (added tokens), but the text after one gets a `▁` of
  its own, where sentencepiece adds one at the start only.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from .protobuf_wire import read_fields

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
SPACE = "\u2581"  # ▁, sentencepiece's escaped whitespace
UNKNOWN_PENALTY = 10.0  # unigram_model.cc's kUnkPenalty


@dataclass
class SentencePieceModel:
    """What a `.model` file says about segmentation."""

    pieces: list[tuple[str, float, int]]  # (piece, score, type) in sentencepiece's id order
    model_type: str = "unigram"
    byte_fallback: bool = False
    treat_whitespace_as_suffix: bool = False
    normalizer: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    user_defined: list[str] = field(default_factory=list)

    def normal_pieces(self) -> dict[str, float]:
        """The pieces segmentation can produce (normal, user-defined, byte), with their scores."""
        return {p: s for p, s, t in self.pieces if t in (NORMAL, USER_DEFINED, BYTE)}


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) of one protobuf message (protobuf_wire.read_fields without the wire type)."""
    return [(number, value) for number, _, value in read_fields(data)]


def read_sentencepiece_model(path: str | Path) -> SentencePieceModel:
    """Read a sentencepiece `.model` file; ValueError (one line) for a file that is not one."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"sentencepiece model {path} does not exist (give spm_train's .model file)")
    try:
        model = _parse(path.read_bytes())
    except (ValueError, IndexError, UnicodeDecodeError, struct.error) as err:
        raise ValueError(f"{path} is not a sentencepiece .model file ({err})") from None
    if not model.pieces:
        raise ValueError(f"{path} is not a sentencepiece .model file (it holds no pieces)")
    return model


def _parse(data: bytes) -> SentencePieceModel:
    model = SentencePieceModel(pieces=[])
    for number, value in _fields(data):
        if number == 1:  # SentencePiece
            piece, score, kind = "", 0.0, NORMAL
            for inner, inner_value in _fields(value):
                if inner == 1:
                    piece = inner_value.decode("utf-8")
                elif inner == 2:
                    score = struct.unpack("<f", inner_value)[0]
                elif inner == 3:
                    kind = inner_value
            model.pieces.append((piece, score, kind))
        elif number == 2:  # TrainerSpec
            for inner, inner_value in _fields(value):
                if inner == 3:
                    model.model_type = MODEL_TYPES.get(inner_value, str(inner_value))
                elif inner == 24:
                    model.treat_whitespace_as_suffix = bool(inner_value)
                elif inner == 35:
                    model.byte_fallback = bool(inner_value)
        elif number == 3:  # NormalizerSpec
            for inner, inner_value in _fields(value):
                if inner == 1:
                    model.normalizer = inner_value.decode("utf-8")
                elif inner == 2:
                    model.precompiled_charsmap = bytes(inner_value)
                elif inner == 3:
                    model.add_dummy_prefix = bool(inner_value)
                elif inner == 4:
                    model.remove_extra_whitespaces = bool(inner_value)
                elif inner == 5:
                    model.escape_whitespaces = bool(inner_value)
    model.user_defined = [p for p, _, t in model.pieces if t == USER_DEFINED]
    return model


def bpe_merges(scores: dict[str, float]) -> list[tuple[str, str]]:
    """sentencepiece BPE's merges in priority order: every split (a, b) of a piece into two pieces, ordered by the
    piece's score (highest first; sentencepiece scores a BPE piece by minus its merge rank)."""
    merges = []
    for piece, score in scores.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in scores and right in scores:
                merges.append((-score, scores[left] * -1, scores[right] * -1, left, right))
    merges.sort()
    return [(left, right) for *_, left, right in merges]


__all__ = ["SPACE", "SentencePieceModel", "bpe_merges", "read_sentencepiece_model"]
