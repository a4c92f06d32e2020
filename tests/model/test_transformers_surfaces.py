"""The private or recently changed Transformers surfaces the package relies on, one test each (issue 24).

When a Transformers release renames or removes one of them, the test named after it fails, instead of users'
translations going quietly wrong. CONTRIBUTING.md ("Transformers surfaces we depend on") lists them with the
module that uses each; keep the two in step.
"""

from __future__ import annotations

import inspect
import re
import warnings

import pytest
import torch
from factories import PAD, TINY_SHAPE, padded_batch, tiny_model

from deep_nmt_hf.model.transformers_compat import CACHE_FIELD, cache_of, takes_cache, with_cache
from deep_nmt_hf.training.trainer import PRIVATE_TRAINER_SURFACES


def parameters(function) -> set[str]:
    return set(inspect.signature(function).parameters)


def test_cache_field_is_the_one_generate_reads_and_passes() -> None:
    """transformers_compat.CACHE_FIELD: the output field `generate` reads the cache from (5.24: `cache`, earlier:
    `past_key_values`), and the keyword its `prepare_inputs_for_generation` passes it under."""
    from transformers import GenerationMixin
    from transformers.modeling_outputs import Seq2SeqLMOutput

    assert CACHE_FIELD in Seq2SeqLMOutput.__dataclass_fields__
    model = tiny_model(seed=1)
    ids, mask = padded_batch([5, 3])
    start = torch.full((2, 1), PAD)
    first = model(input_ids=ids, attention_mask=mask, decoder_input_ids=start, use_cache=True)
    inputs = GenerationMixin.prepare_inputs_for_generation(
        model, start, **with_cache(cache_of(first)), attention_mask=mask
    )
    assert inputs.get(CACHE_FIELD, inputs.get("cache")) is cache_of(first)


def test_deprecate_kwarg_renames_the_old_cache_name() -> None:
    """transformers.utils.deprecation.deprecate_kwarg (takes_cache): `past_key_values=` reaches `cache`."""
    seen = {}

    @takes_cache
    def forward(cache=None, **kwargs):
        seen["cache"], seen["kwargs"] = cache, kwargs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        forward(past_key_values="the cache")
    assert seen == {"cache": "the cache", "kwargs": {}}
    assert "cache" in parameters(forward)  # generate validates model kwargs against the signature


def test_training_arguments_checkpointing_switch() -> None:
    """transformers_compat.checkpointing_argument: the TrainingArguments field that turns on checkpointing."""
    from transformers import Seq2SeqTrainingArguments

    from deep_nmt_hf.model.transformers_compat import checkpointing_argument

    name = checkpointing_argument()
    args = Seq2SeqTrainingArguments(output_dir="unused", use_cpu=True, report_to="none", **{name: True})
    assert getattr(args, name) is True


def test_gradient_checkpointing_layer_wraps_forward() -> None:
    """transformers.modeling_layers.GradientCheckpointingLayer (our encoder / decoder layers)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    assert hasattr(GradientCheckpointingLayer, "gradient_checkpointing")
    model = tiny_model(seed=2).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert all(layer.gradient_checkpointing for layer in model.model.decoder.layers)


def test_all_attention_functions_get_interface() -> None:
    """transformers.modeling_utils.ALL_ATTENTION_FUNCTIONS.get_interface(name, default) (DeepNMTAttention)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def fallback():
        return None

    assert ALL_ATTENTION_FUNCTIONS.get_interface("eager", fallback) is fallback
    assert callable(ALL_ATTENTION_FUNCTIONS.get_interface("sdpa", fallback))


def test_cache_layer_classes_and_their_fields() -> None:
    """transformers.cache_utils: DynamicLayer / StaticLayer and the fields caches.py reads or extends (keys,
    values, is_initialized, max_cache_len, the reorder / batch / crop methods), EncoderDecoderCache.is_updated."""
    from transformers.cache_utils import DynamicCache, DynamicLayer, EncoderDecoderCache, StaticLayer

    for method in ("update", "get_seq_length", "reorder_cache", "crop", "batch_repeat_interleave"):
        assert callable(getattr(DynamicLayer, method))
    assert callable(DynamicLayer.batch_select_indices)
    # crop's two forms (caches.CROP_TO_LENGTH): `max_length` (a length to keep; 5.10) or `tokens_to_remove`
    assert {"max_length", "tokens_to_remove"} & set(parameters(DynamicLayer.crop))
    layer = DynamicLayer()
    assert not layer.is_initialized
    keys = torch.randn(2, 4, 3, 8)
    layer.update(keys, keys)
    assert layer.is_initialized and torch.equal(layer.keys, keys) and torch.equal(layer.values, keys)
    assert "max_cache_len" in parameters(StaticLayer.__init__)
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    assert isinstance(cache.is_updated, dict) and hasattr(cache.self_attention_cache, "layers")


def test_generic_cache_slots_and_their_beam_reordering() -> None:
    """What caches.fit_slots relies on: `generate`'s caches (`DynamicCache(config=...)`, `StaticCache`) hold plain
    `DynamicLayer` / `StaticLayer` slots, which it swaps for ours before their first write, and
    `EncoderDecoderCache.reorder_cache` (beam search's call) reorders through each slot's own `reorder_cache`, so
    our cross-attention slots decide what to gather. That beam search's indices stay within a sentence's beams is
    checked through `generate` itself (test_beam_caches.py: the cross tensors stay the same)."""
    from transformers.cache_utils import (
        DynamicCache,
        DynamicLayer,
        EncoderDecoderCache,
        StaticCache,
        StaticLayer,
    )

    from deep_nmt_hf import DeepNMTConfig

    config = DeepNMTConfig(**TINY_SHAPE)
    assert {type(layer) for layer in DynamicCache(config=config).layers} == {DynamicLayer}
    assert {type(layer) for layer in StaticCache(config=config, max_cache_len=4).layers} == {StaticLayer}

    class Spy(DynamicLayer):
        calls = 0

        def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
            Spy.calls += 1

    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    cache.self_attention_cache.layers.append(Spy())
    cache.cross_attention_cache.layers.append(Spy())
    cache.reorder_cache(torch.tensor([0]))
    assert Spy.calls == 2


def test_beam_search_hooks_of_the_gnmt_penalty() -> None:
    """GenerationMixin._beam_search (looked up on the model's class by `generate`), _update_finished_beams and
    _check_early_stop_heuristic (called through the model, by keyword) with the keyword arguments that
    model/length_penalty.GNMTLengthPenaltyMixin overrides and rewrites."""
    from transformers import GenerationMixin

    assert {"input_ids", "logits_processor", "stopping_criteria", "generation_config"} <= parameters(
        GenerationMixin._beam_search
    )
    assert {"topk_log_probs", "cur_len", "decoder_prompt_len", "length_penalty"} <= parameters(
        GenerationMixin._update_finished_beams
    )
    assert {"running_beam_scores", "cur_len", "decoder_prompt_len", "length_penalty", "early_stopping"} | {
        "max_length"
    } <= parameters(GenerationMixin._check_early_stop_heuristic)


def test_beam_search_hooks_of_the_beam_rules() -> None:
    """The keyword arguments model/beam_rules.BeamRulesMixin reads and rewrites in _update_finished_beams (which
    candidates may end) and _check_early_stop_heuristic (zero's bound), and the ones GenerationMixin.generate takes
    that model/length_limit.SourceLengthLimitMixin passes on positionally."""
    from transformers import GenerationMixin

    assert {
        "next_token_hits_stopping_criteria",
        "top_num_beam_mask",
        "num_beams",
        "is_sent_finished",
        "topk_running_sequences",
        "cur_len",
        "decoder_prompt_len",
    } <= parameters(GenerationMixin._update_finished_beams)
    assert {
        "is_early_stop_heuristic_unsatisfied",
        "running_beam_scores",
        "beam_scores",
        "is_sent_finished",
        "cur_len",
        "max_length",
        "decoder_prompt_len",
    } <= parameters(GenerationMixin._check_early_stop_heuristic)
    assert list(inspect.signature(GenerationMixin.generate).parameters)[1:5] == [
        "inputs",
        "generation_config",
        "logits_processor",
        "stopping_criteria",
    ]


CUSTOM_GENERATE = """
from .helper import NAME


def generate(*args, model, **kwargs):
    return NAME, type(model).__name__, args, sorted(kwargs)
"""


def test_custom_generate_replaces_generate_only_for_a_trusted_load(tmp_path) -> None:
    """`from_pretrained(DIR, trust_remote_code=True)` of a stock class whose folder holds
    custom_generate/generate.py (`GenerationMixin.load_custom_generate`) sets the instance's `generate` to that
    function with the model as the keyword `model` (positional arguments passed on), its relative imports copied
    with it; a plain load leaves Transformers' `generate`. publish/folding.py's `write_custom_generate` and
    model/custom_generate.py rely on all three."""
    from transformers import MarianConfig, MarianMTModel

    shape = dict(d_model=8, encoder_layers=1, decoder_layers=1, encoder_ffn_dim=8, decoder_ffn_dim=8)
    heads = dict(encoder_attention_heads=1, decoder_attention_heads=1)
    config = MarianConfig(vocab_size=8, pad_token_id=1, decoder_start_token_id=1, **heads, **shape)
    MarianMTModel(config).save_pretrained(tmp_path / "model")
    (tmp_path / "model" / "custom_generate").mkdir()
    (tmp_path / "model" / "custom_generate" / "generate.py").write_text(CUSTOM_GENERATE)
    (tmp_path / "model" / "custom_generate" / "helper.py").write_text('NAME = "custom"\n')
    trusted = MarianMTModel.from_pretrained(tmp_path / "model", trust_remote_code=True)
    assert trusted.generate(1, num_beams=2) == ("custom", "MarianMTModel", (1,), ["num_beams"])
    plain = MarianMTModel.from_pretrained(tmp_path / "model")
    assert "generate" not in vars(plain) and type(plain).generate is MarianMTModel.generate


def test_removed_tasks_and_the_pipeline_registry() -> None:
    """transformers.pipelines.REMOVED_TASKS (a dict from 5.20 on; absent before) and PIPELINE_REGISTRY
    (translation_pipeline.py re-registers the task Transformers 5 removed, and takes it off REMOVED_TASKS)."""
    from transformers import pipelines
    from transformers.pipelines import PIPELINE_REGISTRY

    import deep_nmt_hf  # noqa: F401  (registers the task)

    assert isinstance(getattr(pipelines, "REMOVED_TASKS", {}), dict)
    assert "translation" not in getattr(pipelines, "REMOVED_TASKS", {})
    assert "translation" in PIPELINE_REGISTRY.supported_tasks


def test_registered_tokenizer_classes_finds_the_moses_tokenizer_by_name() -> None:
    """transformers.models.auto.tokenization_auto.REGISTERED_TOKENIZER_CLASSES (a dict read first by
    `tokenizer_class_from_name`): `import deep_nmt_hf` puts FairseqMosesTokenizer's name there, so that a converted
    fairseq Moses folder's tokenizer loads without trust_remote_code (deep_nmt_hf/__init__.py)."""
    from transformers.models.auto import tokenization_auto

    import deep_nmt_hf

    assert isinstance(tokenization_auto.REGISTERED_TOKENIZER_CLASSES, dict)
    found = tokenization_auto.tokenizer_class_from_name("FairseqMosesTokenizer")
    assert found is deep_nmt_hf.FairseqMosesTokenizer


def test_fast_tokenizer_hooks_the_converted_tokenizers_override() -> None:
    """PreTrainedTokenizerFast's private hooks our tokenizers wrap (model/tokenization_moses.py, tokenization_bpe01.py):
    `_encode_plus(text, text_pair, ...)` runs for `__call__`, `encode` and `tokenize` (Moses and 0.1 BPE run before
    it), and `_save_pretrained(save_directory, file_names, ...)` runs inside `save_pretrained` before any upload
    (the 0.1 codes file is written there); `tokenizer_class_from_name` finds FairseqBPE01Tokenizer by name."""
    import inspect

    from transformers import PreTrainedTokenizerFast
    from transformers.models.auto import tokenization_auto

    import deep_nmt_hf

    encode = list(inspect.signature(PreTrainedTokenizerFast._encode_plus).parameters)
    assert encode[:3] == ["self", "text", "text_pair"] and "is_split_into_words" in encode
    save = list(inspect.signature(PreTrainedTokenizerFast._save_pretrained).parameters)
    assert save[:3] == ["self", "save_directory", "file_names"]
    found = tokenization_auto.tokenizer_class_from_name("FairseqBPE01Tokenizer")
    assert found is deep_nmt_hf.FairseqBPE01Tokenizer


def test_pipeline_registration_record_and_relative_imports() -> None:
    """Pipeline._registered_impl (the registration pipeline_shipping writes into config.json's custom_pipelines)
    and dynamic_module_utils.get_relative_import_files (the sibling modules shipped with it)."""
    from transformers.dynamic_module_utils import get_relative_import_files

    from deep_nmt_hf.model.pipeline_shipping import custom_pipelines_entry
    from deep_nmt_hf.model.translation_pipeline import TranslationPipeline

    entry = custom_pipelines_entry()["translation"]
    assert entry["impl"] == "translation_pipeline.TranslationPipeline" and entry["pt"]
    assert "translation" in TranslationPipeline._registered_impl
    import deep_nmt_hf.model.translation_pipeline as module

    assert get_relative_import_files(module.__file__) == []  # it imports only transformers


def test_save_pretrained_copies_relative_imports_and_the_registry_record(tmp_path) -> None:
    """save_pretrained of a class with `_auto_class` copies the model file and its relative imports
    (`custom_object_save`): translation_pipeline.py travels that way; PIPELINE_REGISTRY.supported_tasks records the
    registered class under "impl" (DeepNMTConfig drops the entry that class serves)."""
    from transformers.pipelines import PIPELINE_REGISTRY

    import deep_nmt_hf

    model = tiny_model(seed=3)
    assert type(model)._auto_class is not None
    model.save_pretrained(tmp_path)
    assert {"modeling_deep_nmt.py", "pipeline_shipping.py", "translation_pipeline.py"} <= {
        path.name for path in tmp_path.glob("*.py")
    }
    assert PIPELINE_REGISTRY.supported_tasks["translation"]["impl"] is deep_nmt_hf.TranslationPipeline


def test_trainer_checkpoint_names() -> None:
    """transformers.trainer OPTIMIZER_NAME / SCHEDULER_NAME, trainer_utils.rotate_checkpoints /
    PREFIX_CHECKPOINT_DIR (training/atomic_checkpoints.py, training/sharded_saves.py)."""
    from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

    assert OPTIMIZER_NAME.endswith(".pt") and SCHEDULER_NAME.endswith(".pt") and PREFIX_CHECKPOINT_DIR
    assert {"output_dir", "save_total_limit", "best_model_checkpoint", "use_mtime"} <= parameters(
        rotate_checkpoints
    )


@pytest.mark.parametrize("name", sorted(PRIVATE_TRAINER_SURFACES))
def test_private_trainer_surface(name: str) -> None:
    """One private `Trainer` method a piece of `DeepNMTTrainer` overrides or calls (training/trainer.py's
    `PRIVATE_TRAINER_SURFACES`): it exists, takes the parameters we pass or receive, and the Trainer itself still
    calls it (an override the loop no longer calls would be dead without a sound)."""
    from transformers import Trainer

    method = getattr(Trainer, name, None)
    assert method is not None, f"Trainer.{name} is gone"
    assert set(PRIVATE_TRAINER_SURFACES[name]) <= parameters(method), (
        f"Trainer.{name}{inspect.signature(method)}"
    )
    assert re.search(rf"self\.{name}\b", inspect.getsource(Trainer)), f"the Trainer no longer calls {name}"


def test_the_trainer_overrides_no_unlisted_private_method() -> None:
    """Every private `Trainer` method the pieces of `DeepNMTTrainer` define is in `PRIVATE_TRAINER_SURFACES` (so
    has its test above), and the public hooks they override keep the parameters they take."""
    from transformers import Seq2SeqTrainer, Trainer

    from deep_nmt_hf.training import DeepNMTTrainer

    ours = [cls for cls in DeepNMTTrainer.__mro__ if cls.__module__.startswith("deep_nmt_hf.")]
    defined = {name for cls in ours for name, value in vars(cls).items() if callable(value)}
    private = {name for name in defined if name.startswith("_") and not name.startswith("__")}
    assert {name for name in private if hasattr(Seq2SeqTrainer, name)} <= set(PRIVATE_TRAINER_SURFACES)
    public = {
        "compute_loss": {"model", "inputs", "return_outputs", "num_items_in_batch"},
        "log": {"logs", "start_time"},
        "save_model": {"output_dir", "_internal_call"},
        "get_train_dataloader": set(),
        "floating_point_ops": {"inputs"},
    }
    assert {name for name in defined if not name.startswith("_") and hasattr(Trainer, name)} == set(public)
    for name, expected in public.items():
        assert expected <= parameters(getattr(Trainer, name)), f"Trainer.{name}"


def test_accelerate_mixed_precision_names() -> None:
    """accelerate's names the precision code reads (training/precision.py, admin.py): the model's plain forward
    kept as `_original_forward` when `prepare_model` wraps it in autocast, `Accelerator.mixed_precision`,
    `optimizer_step_was_skipped`, `AcceleratedOptimizer.step_was_skipped` and `.scaler`."""
    import accelerate
    from accelerate.optimizer import AcceleratedOptimizer

    assert "_original_forward" in inspect.getsource(accelerate.Accelerator.prepare_model)
    assert isinstance(inspect.getattr_static(accelerate.Accelerator, "optimizer_step_was_skipped"), property)
    assert isinstance(inspect.getattr_static(accelerate.Accelerator, "mixed_precision"), property)
    assert isinstance(inspect.getattr_static(AcceleratedOptimizer, "step_was_skipped"), property)
    assert "self.scaler" in inspect.getsource(AcceleratedOptimizer.__init__)


def test_embedding_resize_internals() -> None:
    """PreTrainedModel._resize_token_embeddings (we extend it to the decoder's own target embedding) and
    _get_resized_embeddings (which resizes it as Transformers resizes the shared one)."""
    from transformers import PreTrainedModel

    assert {"new_num_tokens", "pad_to_multiple_of", "mean_resizing"} <= parameters(
        PreTrainedModel._resize_token_embeddings
    )
    assert {"old_embeddings", "new_num_tokens", "mean_resizing"} <= parameters(
        PreTrainedModel._get_resized_embeddings
    )


def test_tied_weights_keys_as_a_mapping() -> None:
    """PreTrainedModel._tied_weights_keys as {target: source}, also on a submodel (DeepNMTModel's stacks), and
    all_tied_weights_keys gathering them (checkpoint averaging, resuming, sharded loading)."""
    model = tiny_model(seed=3)
    embeddings = {
        f"model.{side}.embed_tokens.weight": "model.shared.weight" for side in ("encoder", "decoder")
    }
    assert dict(model.all_tied_weights_keys) == {"lm_head.weight": "model.shared.weight", **embeddings}
    assert model.lm_head.weight is model.model.shared.weight


def test_save_pretrained_drops_the_tied_keys_of_submodels(tmp_path) -> None:
    """save_pretrained drops a tensor's aliases named in any submodule's `_tied_weights_keys` (our stacks'
    `embed_tokens`), keeping `model.shared.weight`; from_pretrained ties them back without missing keys."""
    from safetensors import safe_open
    from transformers import AutoModelForSeq2SeqLM

    model = tiny_model(seed=3, tie_word_embeddings=False)
    model.save_pretrained(tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as handle:
        assert (
            not any("embed_tokens" in key for key in handle.keys()) and "model.shared.weight" in handle.keys()
        )
    loaded, info = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and loaded.model.encoder.embed_tokens is loaded.model.shared


def test_get_expanded_tied_weights_keys() -> None:
    """PreTrainedModel.get_expanded_tied_weights_keys(all_submodels): post_init and tie_weights ask each
    submodel for its ties through it; Transformers' own returns none without `tie_word_embeddings`, ours
    (DeepNMTModel) keeps the stacks' embedding ties then."""
    from transformers import PreTrainedModel

    assert "all_submodels" in parameters(PreTrainedModel.get_expanded_tied_weights_keys)
    model = tiny_model(seed=3, tie_word_embeddings=False)
    assert PreTrainedModel.get_expanded_tied_weights_keys(model.model) == {}
    assert set(model.all_tied_weights_keys) == {
        f"model.{s}.embed_tokens.weight" for s in ("encoder", "decoder")
    }
    assert model.get_expanded_tied_weights_keys(all_submodels=True) == model.all_tied_weights_keys


def test_mark_tied_weights_as_initialized() -> None:
    """PreTrainedModel.mark_tied_weights_as_initialized(loading_info), called by from_pretrained's finishing step
    before the missing keys are moved off `meta` and initialised: it flags the tie targets' parameters
    `_is_hf_initialized` and may drop flagged keys from `loading_info.missing_keys` (module-tying custom code).
    DeepNMTPreTrainedModel overrides it so that a weight absent under every name stays missing."""
    from types import SimpleNamespace

    from transformers import PreTrainedModel

    assert parameters(PreTrainedModel.mark_tied_weights_as_initialized) == {"self", "loading_info"}
    assert "mark_tied_weights_as_initialized(" in inspect.getsource(PreTrainedModel._finalize_model_loading)
    assert "_move_missing_keys_from_meta_to_device(" in inspect.getsource(
        PreTrainedModel._finalize_model_loading
    )
    model = tiny_model(seed=3)
    everything = set(model.state_dict())
    info = SimpleNamespace(missing_keys=set(everything))
    PreTrainedModel.mark_tied_weights_as_initialized(model, info)
    # flagged through its aliases (the targets' Parameter); 5.24 then drops it from the missing keys as custom code
    assert model.model.shared.weight._is_hf_initialized
    del model.model.shared.weight._is_hf_initialized
    info = SimpleNamespace(missing_keys=set(everything))
    model.mark_tied_weights_as_initialized(info)
    assert info.missing_keys == everything and not getattr(
        model.model.shared.weight, "_is_hf_initialized", False
    )


def test_static_layer_fill_level() -> None:
    """StaticLayer.cumulative_length: a tensor fill level (0-d from 5.24, shape (1,) before) that `update` writes
    at and advances in place; caches.StaticRunningAverage reads the entry before it (MAtt's static slot)."""
    from transformers.cache_utils import StaticLayer

    layer = StaticLayer(max_cache_len=5)
    entries = torch.arange(2 * 4 * 3 * 8, dtype=torch.float32).view(2, 4, 3, 8)
    layer.update(entries, entries)
    assert isinstance(layer.cumulative_length, torch.Tensor) and int(layer.cumulative_length.reshape(())) == 3
    assert layer.keys.shape == (2, 4, 5, 8) and torch.equal(layer.keys[:, :, :3], entries)
    layer.update(entries[:, :, :1], entries[:, :, :1])
    assert int(layer.get_seq_length().reshape(())) == 4 and torch.equal(
        layer.values[:, :, 3], entries[:, :, 0]
    )


@pytest.mark.parametrize(
    "name",
    ["constant_", "copy_", "normal_", "ones_", "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_"],
)
def test_initialization_module(name: str) -> None:
    """transformers.initialization (init functions that respect `_is_hf_initialized`), used by _init_weights."""
    from transformers import initialization as init

    assert callable(getattr(init, name))


def test_masking_utils_signatures_and_the_implementation_switch() -> None:
    """transformers.masking_utils (the decoder and encoder masks): `create_causal_mask`'s fourth positional
    parameter is the cache (`cache` from 5.24, `past_key_values` before: we pass it by position), and
    `create_bidirectional_mask` takes `encoder_hidden_states`. The mask's form follows only
    `config._attn_implementation`, which `mask_config` swaps to eager for an `output_attentions` call."""
    from transformers.masking_utils import create_bidirectional_mask, create_causal_mask

    from deep_nmt_hf.model.modeling_deep_nmt import mask_config

    assert list(inspect.signature(create_causal_mask).parameters)[3] in ("cache", "past_key_values")
    assert "encoder_hidden_states" in parameters(create_bidirectional_mask)
    model = tiny_model(seed=2)
    model.set_attn_implementation("sdpa")
    states = torch.zeros(2, 4, model.config.d_model)
    assert create_causal_mask(model.config, states, None, None) is None  # sdpa: is_causal, no mask
    eager = create_causal_mask(mask_config(model.config, True), states, None, None)
    assert eager.dtype == states.dtype and eager[0, 0, 0, 1] < -1e30 and eager[0, 0, 1, 0] == 0


def test_output_recording_of_the_stacks() -> None:
    """transformers.utils.output_capturing (`OutputRecorder`, `capture_outputs`) and its registry, filled in
    `PreTrainedModel.__init__`: the stacks are PreTrainedModels that never call `post_init` (the enclosing model
    initialises), and their `_can_record_outputs` still records one entry per layer application."""
    from transformers.utils.output_capturing import OutputRecorder, capture_outputs

    assert {"target_class", "index"} <= set(OutputRecorder.__dataclass_fields__) and callable(capture_outputs)
    model = tiny_model(seed=3)
    ids, mask = padded_batch([5, 3])
    out = model.model.encoder(
        input_ids=ids, attention_mask=mask, output_hidden_states=True, output_attentions=True
    )
    layers = model.config.encoder_layers
    assert len(out.hidden_states) == layers + 1 and len(out.attentions) == layers
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)


def test_config_subclasses_are_keyword_dataclasses_and_save_validates(tmp_path) -> None:
    """`PreTrainedConfig.__init_subclass__` makes each config subclass a keyword-only dataclass whose `__init__`
    sets the fields and hands every other keyword to `__post_init__` (DeepNMTConfig fills its derived defaults and
    validates there; a variant config is field-default overrides), and `save_pretrained` calls `validate()` before
    it writes."""
    import dataclasses

    from deep_nmt_hf import AdminConfig, DeepNMTConfig

    assert "d_model" in {field.name for field in dataclasses.fields(DeepNMTConfig)}
    assert {field.name: field.default for field in dataclasses.fields(AdminConfig)}[
        "residual_scaling"
    ] == "admin"
    config = DeepNMTConfig(vocab_size=48, not_a_field="kept")  # an unknown keyword reaches __post_init__
    assert config.not_a_field == "kept" and config.pad_token_id == 47  # the derived default
    with pytest.raises(ValueError, match="accepts only keyword arguments"):
        DeepNMTConfig(48)
    config.pad_token_id = 48  # not checked when set ...
    with pytest.raises(ValueError, match="pad_token_id=48 is outside the vocabulary"):
        config.save_pretrained(tmp_path)  # ... but before it is written
