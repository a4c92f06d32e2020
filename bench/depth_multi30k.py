"""Depth that pays? Each paper's claim on Multi30k en→de, every row trained to the end of one annealed budget.

Rows (`depth.rows.MODELS`) pair each claim's counterfactual with its claimed model: post-LN 18-6 trained the
default way against ADMIN 18-6 and DeepNorm 18-6 (and the 36-6 trio; where ADMIN 36-6 fails at the paper's lr,
a control at a lower peak lr: `IF_FAILS`, and where that control trains, default post-LN 36-6 at the same lr:
`IF_TRAINS`); post-LN 18-6 against pre-LN 18-6 and pre-LN DLCL 18-6; MAtt 18-6 with and without DS-Init (and,
as a control, DS-Init + MAtt with the paper's 6-layer dropouts); a plain pre-LN 6-12 decoder against the one
with CAD + DDR + ALD, and a plain 6-24 (the 6-24 with CAD + DDR + ALD runs only if the plain one collapses:
`IF_FAILS`); the shared-layers model against the unshared one with as many layer applications; the 6-6 models
and stock MarianMTModel 6-6. Each row trains with its paper's recipe (deep_nmt_hf.science.recipes: optimizer, β's, ε,
clipping, dropouts, label smoothing, embedding sharing, beam, length penalty, averaging).

What is scaled to Multi30k (the same rule for every row):
- Budget and schedule: every row trains `--epochs` (30) epochs: the recipe's warmup, then the learning rate
  decays linearly to 0 at the last epoch (Transformers' "linear" schedule; fairseq's polynomial_decay with power 1
  and end learning rate 0). The papers' inverse-sqrt schedule never anneals: under it the 6-6 models were still
  improving at epoch 29 (issue #27), so "best" meant "last" and a fixed budget ranked speed of convergence. A
  budget that ends at learning rate 0 ends annealed, its last epochs flat, whatever the row. `--schedule cosine`
  decays by a half cosine instead; `--patience N` also stops a row after N epochs without a better validation loss
  (0, the default: never). The budget itself is chosen from a pilot of the 6-6 rows at 10 / 20 / 30 / 40
  epochs (`--pilot`): the smallest budget after which the next one moves the difference between rows by less
  than 1 BLEU (30: Marian 6-6 − post-6-6 is +10.6 / +5.4 / +3.8 / +3.4; absolute BLEU still rises by ~1.5-2).
- Batches: one size for every row, `--max-tokens` (1536) padded tokens per side, fairseq's --max-tokens. The
  papers' updates of 25k-65k target tokens would give 8-20 updates an epoch on Multi30k's 29k pairs (about 500k
  target tokens); 1536 gives about 500.
- Learning rate: each recipe's peak as its paper sets it (ADMIN 1e-3, DLCL's deep models 2e-3, DS-Init + MAtt and
  the deep decoder 7e-4, ...); a row's own override sits in `Row.options` with the reason in `Row.why`.
- Warmup: each recipe's warmup steps × `--warmup-scale` (0.1): ADMIN's 4000 → 400, DLCL's deep 16000 → 1600, so
  the recipes keep their warmups relative to each other, at a tenth of updates counted for WMT runs of 100k+.
- Width `--d-model` (64) for every row; a joint BPE vocabulary of `--vocab-size` (4000).

After every epoch: validation loss and BLEU (beam 4, `--valid-sentences` sentences). At the end: test_2016_flickr
BLEU / chrF / TER (sacreBLEU, signatures) of the best-validation-loss epoch checkpoint and of the average of the
last `--average` epoch checkpoints; per test sentence, sacreBLEU's BLEU statistics (the report's paired bootstrap
over seeds and sentences needs no translations); the eval-mode token NLL on training and validation pairs and on
validation pairs with wrong sources (over-fitting gap, source reliance). A run that diverges (non-finite loss) is
finished too, with the step and the reason in its record.

Operation: `plan()` orders the work so that every sitting leaves a valid partial report: first every row of
FIRST_PASS with seed 1 (each claim's counterfactual beside its claimed row), then seeds 2 and 3 of the HEADLINE rows
and of the best deep row, then the rest (LATER: the 36-6 rows and the DS-Init dropout control, seed 1, and the
ADMIN lr control where it is triggered), then a second seed of every other row (SECOND_SEED, cheapest first);
the plan is made again whenever a run ends, so a row a result adds starts in the same sitting. Every run trains in its own process with one
torch thread at nice 19, `--jobs` at once; its Trainer checkpoints (one per epoch), logs and saved models (best,
averaged; they load with AutoModelForSeq2SeqLM) live in
``~/.cache/deep_nmt_bench/depth-annealed/e{EPOCHS}/ROW/seed{S}/`` ($DEEP_NMT_BENCH_CACHE moves it), so the study
spans sittings: ``--reuse`` resumes unfinished runs from their last epoch checkpoint (end the workers before CI or
timing benches run on the machine; ``--until HH:MM`` ends them then, and starts only runs that its measured CPU-s
per epoch, at this machine's speed, say will finish before it, so a sitting leaves no half-trained run for a
machine that may not be kept; ``--kept`` on a kept machine starts longer runs too). Each finished run writes its
record, numbers only, to ``bench/results/depth_multi30k/e{EPOCHS}/ROW/seed{S}.json`` and its final (averaged)
weights in float16 beside it, ``seed{S}.averaged.safetensors`` (bench/lib/study_weights.py; both committed, since
a machine is not always handed on: `load_averaged` reloads a run's model on any machine; a finished run whose
weights were lost with its machine is re-trained last with the same seed, and its record keeps what the first run
measured); the report (depth.report) is rebuilt from the records. Costs are CPU-s of one reference machine: every
epoch carries its machine's speed probe (bench/lib/machine_speed.py).

The study's code is the package bench/lib/depth/ (its docstring says which part is where); this script is its
command line.

    nice -n 19 python -m bench.depth_multi30k --reuse           # the plan (~55 CPU-hours; resumable)
    nice -n 19 python -m bench.depth_multi30k --reuse --until 17:15   # a sitting: only runs that end by then
    nice -n 19 python -m bench.depth_multi30k --reuse --until 17:15 --kept  # a kept machine: longer runs too
    python -m bench.depth_multi30k --reuse --only admin-18-6 --seeds 1 2 3
    python -m bench.depth_multi30k --report-only                # bench/results/depth_multi30k.{md,json,png}
    python -m bench.depth_multi30k --pilot                      # rows recorded at several --epochs budgets
    python -m bench.depth_multi30k --quick                      # smoke test: d 32, 2 epochs, 1000 pairs
"""

from __future__ import annotations

import argparse

from bench.lib.depth import core, study
from bench.lib.depth.pilot import pilot_report
from bench.lib.depth.report import report, rescore_plan


def rescore(args: argparse.Namespace) -> None:
    """`--rescore`: every run of every verdict pair whose two rows decode with different settings, decoded again
    under the other row's setting (depth.report.rescore_plan), one thread, cached per run and setting."""
    import torch

    torch.set_num_threads(1)
    todo = rescore_plan(core.load_records(core.records_root(args), args.epochs), args)
    for i, (name, seed, setting) in enumerate(todo, 1):
        result = study.rescore_run(name, seed, setting, args)
        print(
            f"[{i}/{len(todo)}] {name} seed {seed} under {core.setting_tag(setting)}: BLEU {result['bleu']:.2f} "
            f"(own setting {result['recorded_bleu']:.2f}), {result['cpu_s']:.0f} CPU-s",
            flush=True,
        )


def main() -> None:
    args = study.build_parser(__doc__).parse_args()
    if args.quick:
        args.d_model, args.epochs, args.max_train_samples = 32, 2, 1000
        args.valid_sentences, args.max_test_samples, args.average = 40, 40, 2
        args.warmup_scale, args.status_every = 0.005, 30.0
    if args.worker:
        study.train_model(args.worker, args.seeds[0], args)
    elif args.rescore:
        rescore(args)
    elif args.report_only:
        report(args)
    elif args.pilot:
        pilot_report(args)
    else:
        study.orchestrate(args)


if __name__ == "__main__":
    main()
