"""One joint BPE tokenizer for source and target, with the Marian / CTranslate2 special-token layout.

Special-token layout (checked by `check_special_token_layout`):

    ``</s>``  = id 0                (eos; appended to every sequence, source and target alike)
    ``<unk>`` = id 1
    ``<pad>`` = id vocab_size - 1   (the last id; also the decoder start token)
    no BOS token

Reason: stock `MarianMTModel` and CTranslate2's Marian converter expect exactly this layout (eos 0, unk 1,
pad last) and start the decoder from the pad id (`decoder_start_token_id = pad_token_id`). Keeping it means a
trained model can later be folded into `MarianMTModel` and converted to CTranslate2 without remapping ids.

"Pad last" is obtained by training BPE with the special tokens ``["</s>", "<unk>"]`` (ids 0 and 1) and adding
``<pad>`` after training, so that it gets the next free id; hence `vocab_size = len(tokenizer)`.

Pipeline: NFKC normalizer, SentencePiece-style Metaspace ("▁") pre-tokenizer and decoder (so decoding gives
back clean text), BPE model, and a TemplateProcessing post-processor that appends ``</s>``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

EOS_TOKEN = "</s>"
UNK_TOKEN = "<unk>"
PAD_TOKEN = "<pad>"

# tokens that take part in BPE training, in id order (pad is added afterwards so that it is last)
_TRAINED_SPECIAL_TOKENS = [EOS_TOKEN, UNK_TOKEN]
_NUM_SPECIAL_TOKENS = 3

__all__ = [
    "EOS_TOKEN",
    "PAD_TOKEN",
    "UNK_TOKEN",
    "check_special_token_layout",
    "save_tokenizer",
    "special_token_ids",
    "train_tokenizer",
]


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 8000,
    min_frequency: int = 2,
    model_max_length: int = 512,
) -> PreTrainedTokenizerFast:
    """Train one joint BPE tokenizer on `texts` (pass source and target sentences together).

    `texts` may be any iterable, e.g. a generator streaming a corpus (`preprocessing.corpus_texts`, which can
    also draw a seeded sample): it is consumed once by the `tokenizers` trainer and never turned into a list.

    The result has exactly `vocab_size` ids when the corpus supports that many merges (fewer on a tiny
    corpus), with the Marian layout described in the module docstring.

    Raises:
        ValueError: `texts` holds no non-blank text, or `vocab_size` cannot hold the special tokens plus
            the character alphabet of the corpus.
        TypeError: `texts` is a single string rather than an iterable of sentences.
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be an iterable of sentences, not a single string")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= _NUM_SPECIAL_TOKENS:
        raise ValueError(
            f"vocab_size={vocab_size!r} is too small: it must exceed the {_NUM_SPECIAL_TOKENS} special tokens "
            f"({EOS_TOKEN}, {UNK_TOKEN}, {PAD_TOKEN}) and also hold the character alphabet of the corpus"
        )
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 1:
        raise ValueError(f"min_frequency={min_frequency!r} must be a positive integer")
    if isinstance(model_max_length, bool) or not isinstance(model_max_length, int) or model_max_length < 1:
        raise ValueError(f"model_max_length={model_max_length!r} must be a positive integer")

    counter = {"texts": 0}

    def counted(items: Iterable[str]) -> Iterator[str]:
        for text in items:
            if not isinstance(text, str):
                raise TypeError(f"texts must contain strings, found {type(text).__name__}: {text!r}")
            if text.strip():
                counter["texts"] += 1
                yield text

    tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 1,  # one id is kept free for <pad>
        min_frequency=min_frequency,
        special_tokens=list(_TRAINED_SPECIAL_TOKENS),
        show_progress=False,
    )
    tokenizer.train_from_iterator(counted(texts), trainer=trainer)
    if counter["texts"] == 0:
        raise ValueError("texts is empty (no non-blank sentence): cannot train a tokenizer")

    trained_size = tokenizer.get_vocab_size()
    if trained_size > vocab_size - 1:
        # the BPE trainer always keeps the whole alphabet, even beyond the requested size
        alphabet = trained_size - len(_TRAINED_SPECIAL_TOKENS)
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the {_NUM_SPECIAL_TOKENS} special tokens plus the "
            f"{alphabet} characters of the corpus alphabet need vocab_size >= {trained_size + 1}"
        )
    tokenizer.add_special_tokens([PAD_TOKEN])
    eos_id = tokenizer.token_to_id(EOS_TOKEN)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS_TOKEN}",
        pair=f"$A {EOS_TOKEN} $B {EOS_TOKEN}",
        special_tokens=[(EOS_TOKEN, eos_id)],
    )

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        pad_token=PAD_TOKEN,
        padding_side="right",
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
    check_special_token_layout(wrapped)
    return wrapped


def check_special_token_layout(tokenizer: PreTrainedTokenizerFast) -> None:
    """Raise ValueError naming every violation of the Marian layout (eos 0, unk 1, pad = last id)."""
    size = len(tokenizer)
    expected = {
        "eos_token_id": (EOS_TOKEN, 0),
        "unk_token_id": (UNK_TOKEN, 1),
        "pad_token_id": (PAD_TOKEN, size - 1),
    }
    problems = []
    for attribute, (default_token, wanted) in expected.items():
        actual = getattr(tokenizer, attribute, None)
        if actual is None:
            problems.append(f"{attribute} is not set (expected {default_token} at id {wanted})")
        elif actual != wanted:
            problems.append(f"{attribute}={actual} but must be {wanted}")
    if problems:
        raise ValueError(
            f"tokenizer does not follow the Marian special-token layout (eos 0, unk 1, pad = last id "
            f"{size - 1} of {size}): " + "; ".join(problems)
        )


def special_token_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, int]:
    """Ids the model config is built from; checks the layout first (ValueError if it is wrong).

    Returns {"eos_token_id", "unk_token_id", "pad_token_id", "decoder_start_token_id" (= pad), "vocab_size"}.
    """
    check_special_token_layout(tokenizer)
    pad = int(tokenizer.pad_token_id)
    return {
        "eos_token_id": int(tokenizer.eos_token_id),
        "unk_token_id": int(tokenizer.unk_token_id),
        "pad_token_id": pad,
        "decoder_start_token_id": pad,
        "vocab_size": len(tokenizer),
    }


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, directory: str | os.PathLike[str]) -> tuple[str, ...]:
    """Save with `save_pretrained`; `AutoTokenizer.from_pretrained(directory)` loads it back."""
    return tuple(tokenizer.save_pretrained(os.fspath(directory)))
