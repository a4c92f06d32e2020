"""Each paper's headline setting by name: model shape + recipe + batch, accumulation, epochs, averaging, data,
test set and reported score, with the exact command a user with a GPU cluster runs.

`deep-nmt train --preset admin-60-12-wmt14-en-fr ...` takes everything from here (explicit flags win); `command`
writes the full `accelerate launch` line with every value spelled out, as the README lists it. Every value names
its source (paper section or released script, as in `recipes.py`); the batch is per process, so the command's
process count is part of the setting (an update sees processes × max_tokens × update_freq tokens).

The names are preset_names.py's `PAPER_PRESET_NAMES` (which `deep-nmt --help` lists without importing this
module): `PRESETS` holds the setting of each, in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .preset_names import PAPER_PRESET_NAMES
from .recipes import (
    CLINIC,
    DEEPNMT,
    DLCL_SCRIPT,
    DSINIT_PROCESSES,
    DSINIT_TARGET_TOKENS,
    Setting,
    budget_for_target_tokens,
    get_recipe,
)


@dataclass(frozen=True)
class PaperPreset:
    """One paper's headline setting: `variant`'s shape preset `shape` trained with `recipe`, then `options`
    (TrainingOptions fields) and `config` (config fields) on top, on `processes` processes."""

    paper: str
    recipe: str
    shape: str
    processes: Setting
    options: dict[str, Setting]
    src_lang: str
    tgt_lang: str
    data: str
    vocab_size: Setting
    valid: str
    test: str
    reported: str
    signature: str
    config: dict[str, Setting] = field(default_factory=dict)


SACREBLEU_ADMIN = "BLEU+case.mixed+lang.{pair}+numrefs.1+smooth.exp+test.wmt14+tok.13a+version.1.2.10"


def _dsinit_matt(depth: int, table_row: int, reported: str) -> PaperPreset:
    """The DS-Init + MAtt preset at `depth` layers per side: Table 3 row `table_row` of the paper."""
    return PaperPreset(
        paper="dsinit-merged-attention",
        recipe="dsinit_matt",
        shape=f"{depth}L-{depth}L",
        processes=Setting(DSINIT_PROCESSES, "paper silent; our choice (recipes.DSINIT_PROCESSES)"),
        options={
            "max_tokens": Setting(
                budget_for_target_tokens(DSINIT_TARGET_TOKENS[depth], DSINIT_PROCESSES),
                f"Table 3 row {table_row}: bs = {DSINIT_TARGET_TOKENS[depth] // 1000}K target tokens per update, "
                "converted (recipes.budget_for_target_tokens)",
            ),
            "max_steps": Setting(300_000, "sec. 5.1: 300K maximum steps"),
            "save_steps": Setting(5000, "paper silent; bzhangGo/zero run.py save_freq=5000"),
        },
        src_lang="en",
        tgt_lang="de",
        data="WMT14 En-De as Vaswani et al. (2017) (separate 32K BPE per side in the paper; ours is joint)",
        vocab_size=Setting(32000, "our choice: joint BPE of the usual 32K (the paper's are per side)"),
        valid="newstest2013",
        test="newstest2014 (the filtered 2737 pairs, footnote 4)",
        reported=f"{reported} (Table 3 row {table_row})",
        signature="BLEU+c.mixed+#.1+s.exp+tok.13a+v.1.2.20 (footnote 5)",
    )


_SETTINGS: dict[str, PaperPreset] = {
    "admin-60-12-wmt14-en-fr": PaperPreset(
        paper="admin-very-deep-transformers-nmt",
        recipe="admin",
        shape="60L-12L",
        processes=Setting(16, DEEPNMT + ": 16 GPUs (paper silent)"),
        options={
            "learning_rate": Setting(7e-4, "footnote 8: 0.0007 for FR (" + DEEPNMT + ": --lr 0.001)"),
            "warmup_steps": Setting(8000, "footnote 8: 8000 for FR"),
            "max_tokens": Setting(3584, "footnote 8: 3584 (" + DEEPNMT + ": 3200)"),
            "gradient_accumulation_steps": Setting(8, DEEPNMT + ": --update-freq 8"),
            "num_train_epochs": Setting(50, "footnote 8: max 50 epochs"),
            "num_beams": Setting(5, CLINIC + "eval_wmt_en-fr.sh: --beam 5"),
            "length_penalty": Setting(0.8, CLINIC + "eval_wmt_en-fr.sh: --lenpen 0.8"),
        },
        config={"dropout": Setting(0.1, CLINIC + "wmt14_en-fr.md admin 60-12l: 0.1 (" + DEEPNMT + ": 0.2)")},
        src_lang="en",
        tgt_lang="fr",
        data="WMT14 En-Fr, 36M pairs as Ott et al. (2018) (fairseq prepare-wmt14en2fr.sh)",
        vocab_size=Setting(40000, "sec. 4: 40k subword vocabulary"),
        valid="valid (fairseq's)",
        test="newstest2014",
        reported="43.8 BLEU (multi-bleu.perl), 41.8 sacreBLEU (Tables 1-2)",
        signature=SACREBLEU_ADMIN.format(pair="en-fr") + " (footnote 15)",
    ),
    "admin-60-12-wmt14-en-de": PaperPreset(
        paper="admin-very-deep-transformers-nmt",
        recipe="admin",
        shape="60L-12L",
        processes=Setting(4, CLINIC + "wmt14_en-de.md: 4 GPUs (paper silent)"),
        options={
            "gradient_accumulation_steps": Setting(
                2, "our choice: 4 × 3584 × 2 ≈ " + CLINIC + "wmt14_en-de.md's 4 × 8192 tokens per update"
            ),
            "num_train_epochs": Setting(50, "footnote 8: max 50 epochs"),
        },
        src_lang="en",
        tgt_lang="de",
        data="WMT14 En-De, 4.5M pairs as So et al. (2019)",
        vocab_size=Setting(32000, "sec. 4: 32K subword vocabulary"),
        valid="newstest2013",
        test="newstest2014",
        reported="30.1 BLEU (multi-bleu.perl), 29.5 sacreBLEU (Tables 1-2)",
        signature=SACREBLEU_ADMIN.format(pair="en-de") + " (sec. 4: tok.13a+version.1.2.10)",
    ),
    "dsinit-matt-12-12-wmt14-en-de": _dsinit_matt(12, 13, "28.55 BLEU (tokenized), 27.9 sacreBLEU"),
    "dsinit-matt-20-20-wmt14-en-de": _dsinit_matt(20, 16, "28.67 BLEU (tokenized), 28.0 sacreBLEU"),
    "dlcl-30-6-wmt16-en-de": PaperPreset(
        paper="prenorm-dlcl",
        recipe="dlcl",
        shape="30L-6L",
        processes=Setting(8, "Table 1: batch sizes 'if running on 8 GPUs'; " + DLCL_SCRIPT + ": 8 devices"),
        options={"num_train_epochs": Setting(20, DLCL_SCRIPT + ": max_epoch=20 (appendix: 50k updates)")},
        src_lang="en",
        tgt_lang="de",
        data="WMT16 En-De (Google's preprocessed WMT'16, 4.5M pairs), 32k joint BPE (sec. 4.1)",
        vocab_size=Setting(32000, "sec. 4.1: 32k merge operations, shared vocabulary"),
        valid="newstest2013",
        test="newstest2014",
        reported="29.3 BLEU (multi-bleu.perl, tokenized; Table 1)",
        signature="none reported: tokenized multi-bleu.perl ("
        + DLCL_SCRIPT
        + ": wmt_en2de_google_multi_bleu.sh)",
    ),
    "shared-layers-t4-enc20-dec4-wmt16-en-de": PaperPreset(
        paper="recurrent-shared-layers",
        recipe="shared_layers",
        shape="stack-T4-enc20-dec4",
        processes=Setting(8, "sec. 5.1.2: 8 P100 GPUs"),
        options={
            "num_train_epochs": Setting(20, "paper silent; our choice: its baseline's (" + DLCL_SCRIPT + ")")
        },
        src_lang="en",
        tgt_lang="de",
        data="WMT16 En-De as Ott et al. (2018), 4.5M pairs, 32k joint BPE (sec. 5.1.1)",
        vocab_size=Setting(32000, "sec. 5.1.1: 32k joint BPE"),
        valid="newstest2013",
        test="newstest2014",
        reported="29.3 BLEU (tokenized; Table 1)",
        signature="none reported: case-sensitive tokenized BLEU (sec. 5.1.1)",
    ),
    "deep-decoder-27-27-wmt14-en-de": PaperPreset(
        paper="deep-decoder-cad-crt",
        recipe="deep_decoder",
        shape="27L-27L",
        processes=Setting(8, "sec. 4.1: eight V100 GPUs"),
        options={
            "max_steps": Setting(200_000, "sec. 4.1: 200K steps for En-De"),
            "save_steps": Setting(
                2000, "paper silent; our choice (Vaswani et al. average 10-minute checkpoints)"
            ),
        },
        src_lang="en",
        tgt_lang="de",
        data="WMT14 En-De, 4.5M pairs, Moses-tokenized (sec. 4.1)",
        vocab_size=Setting(32000, "paper silent; our choice: the usual 32K joint BPE"),
        valid="newstest2012+newstest2013",
        test="newstest2014",
        reported="30.31 BLEU (multi-bleu.perl), 28.8 sacreBLEU (Table 1, DEEP+CAD+CRT 27-27)",
        signature="not given (sacreBLEU's defaults: 13a, mixed case)",
    ),
}

if set(_SETTINGS) != set(PAPER_PRESET_NAMES):
    raise RuntimeError(
        "the paper presets here and preset_names.py's PAPER_PRESET_NAMES differ: "
        f"{sorted(set(_SETTINGS) ^ set(PAPER_PRESET_NAMES))}"
    )
PRESETS: dict[str, PaperPreset] = {name: _SETTINGS[name] for name in PAPER_PRESET_NAMES}


def get_preset(name: str) -> PaperPreset:
    """The paper preset called `name`; ValueError listing the valid names otherwise."""
    if name not in PRESETS:
        raise ValueError(f"paper preset {name!r} is unknown; valid: {', '.join(PRESETS)}")
    return PRESETS[name]


def preset_values(name: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(recipe, TrainingOptions fields, config fields) of a preset: the recipe's variant and the shape preset
    come with the options; the caller puts explicit values on top."""
    preset = get_preset(name)
    options = {key: setting.value for key, setting in preset.options.items()}
    options.update(variant=get_recipe(preset.recipe)["variant"].value, preset=preset.shape)
    return preset.recipe, options, {key: setting.value for key, setting in preset.config.items()}


def command(name: str, data_dir: str = "data/{name}", output_dir: str = "out/{name}") -> str:
    """The exact `accelerate launch` training line of a preset, every value spelled out, and its evaluation."""
    preset = get_preset(name)
    recipe = {key: s.value for key, s in get_recipe(preset.recipe).items()}
    values = {**recipe, **{key: s.value for key, s in preset.options.items()}}
    data, out = data_dir.format(name=name), output_dir.format(name=name)
    test = preset.test.split(" ")[0]
    flags = [
        f"--preset {name}",
        f"--data-dir {data} --src-lang {preset.src_lang} --tgt-lang {preset.tgt_lang}",
        f"--valid-split {preset.valid.split(' ')[0].split('+')[0]} --test-split {test}",
        f"--vocab-size {preset.vocab_size.value} --max-tokens {values['max_tokens']}",
        f"--update-freq {values['gradient_accumulation_steps']}",
    ]
    if "max_steps" in values:
        save = (
            f" --save-steps {values['save_steps']}" if "save_steps" in values else ""
        )  # else train's default
        flags.append(f"--max-steps {values['max_steps']}{save}")
    else:
        flags.append(f"--epochs {values['num_train_epochs']}")
    if values["save_strategy"] == "epoch":
        flags.append(f"--average-last-epochs {values['average_last_checkpoints']}")
    else:
        flags.append(f"--average-last-checkpoints {values['average_last_checkpoints']}")
    flags.append(f"--keep-checkpoints --output-dir {out}")
    launch = (
        f"accelerate launch --multi_gpu --num_processes {preset.processes.value} -m deep_nmt_hf.cli train"
    )
    return " \\\n    ".join([launch, *flags]) + f"\ndeep-nmt evaluate {out} --data-dir {data} --split {test}"
