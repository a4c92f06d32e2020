"""`pipeline("translation", ...)` for encoder-decoder models.

transformers 5 removed its "translation" (and "text2text-generation") pipeline tasks (see its MIGRATION_GUIDE_V5,
"pipelines"). Translation with a seq2seq model is what this project is for, so importing `deep_nmt_hf` registers
`TranslationPipeline` under the task name "translation" again: `pipeline("translation", model=..., tokenizer=...)`
then works for our models and for stock ones (MarianMTModel, Pegasus, folded checkpoints) alike and returns
`[{"translation_text": ...}, ...]` as the old pipeline did. Generation settings (num_beams, max_new_tokens, ...)
are taken from the call or the pipeline's keyword arguments, else from the model's generation_config.
"""

from __future__ import annotations

from typing import Any

from transformers import AutoModelForSeq2SeqLM, Pipeline, pipelines
from transformers.pipelines import PIPELINE_REGISTRY


class TranslationPipeline(Pipeline):
    """Text in, translated text out: tokenize → `model.generate` → decode."""

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def __call__(self, inputs: str | list[str], **kwargs: Any) -> list[dict[str, str]]:
        """Translate a string or a list of strings; returns one ``{"translation_text": ...}`` per input, always
        as a list (a single string gives a one-element list, as Transformers 4's translation pipeline did)."""
        result = super().__call__(inputs, **kwargs)
        return [result] if isinstance(inputs, str) else result

    def _sanitize_parameters(
        self, max_length: int | None = None, truncation: bool = True, **generate_kwargs: Any
    ):
        preprocess = {"truncation": truncation}
        if max_length is not None:
            preprocess["max_length"] = max_length
        return preprocess, generate_kwargs, {}

    def preprocess(self, text: str, truncation: bool = True, max_length: int | None = None) -> dict:
        if not isinstance(text, str):
            raise ValueError(
                f"the translation pipeline takes strings (or lists of strings), got {type(text).__name__}"
            )
        inputs = self.tokenizer(text, truncation=truncation, max_length=max_length, return_tensors="pt")
        # a converted fairseq tokenizer keeps the BPE pieces its dictionary lacks past the model's vocabulary
        # (publish/fairseq_tokenizer.py): fairseq reads each as <unk>, and so does the model here
        vocab_size = source_vocab_size(self.model.config)
        unk = self.tokenizer.unk_token_id
        if isinstance(vocab_size, int) and isinstance(unk, int) and len(self.tokenizer) > vocab_size:
            inputs["input_ids"] = inputs["input_ids"].masked_fill(inputs["input_ids"] >= vocab_size, unk)
        return inputs

    def _forward(self, model_inputs: dict, **generate_kwargs: Any) -> dict:
        return {"output_ids": self.model.generate(**model_inputs, **generate_kwargs)}

    def postprocess(self, model_outputs: dict) -> dict[str, str]:
        text = self.tokenizer.decode(model_outputs["output_ids"][0], skip_special_tokens=True)
        return {"translation_text": text.strip()}


def source_vocab_size(config: Any) -> int | None:
    """The encoder's vocabulary size: FSMT's `src_vocab_size` (its `vocab_size` is the target's) where the config
    has one, else `vocab_size`."""
    return getattr(config, "src_vocab_size", None) or getattr(config, "vocab_size", None)


def register_translation_pipeline() -> None:
    """Make `pipeline("translation")` available again (idempotent)."""
    # from 5.20 on Transformers lists the task in REMOVED_TASKS, which makes `pipeline()` refuse it
    getattr(pipelines, "REMOVED_TASKS", {}).pop("translation", None)
    if "translation" not in PIPELINE_REGISTRY.supported_tasks:
        PIPELINE_REGISTRY.register_pipeline(
            "translation", pipeline_class=TranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
        )
