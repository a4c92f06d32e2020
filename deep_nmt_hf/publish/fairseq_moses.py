"""fairseq's `--tokenizer moses` around a converted tokenizer: `FairseqMosesTokenizer`, now in
model/tokenization_moses.py (with `MosesMixin`, which the two-vocabulary `PairedTokenizerFast` uses too), re-exported
here under its former name."""

from __future__ import annotations

from ..model.tokenization_moses import MOSES_OPTIONS, FairseqMosesTokenizer, MosesMixin

__all__ = ["MOSES_OPTIONS", "FairseqMosesTokenizer", "MosesMixin"]
