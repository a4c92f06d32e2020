#!/usr/bin/env bash
# One device call of at most 9.5 minutes on a CUDA machine (issues #48, #55), parts in the order of what is still
# open, each under its own `timeout`, the later ones skipped (and logged) once the call's budget is spent:
#   1. stalls      bench/gpu_training.py --sections stalls: ADMIN 18-6 bf16, whole epochs, padding plans (exact /
#                  multiples of 8 / length buckets) x cuDNN SDPA on / off: the "no step > 2x median after the
#                  first 20" statistic and trainer / raw target tokens/s (goal >= 0.9)            (issue #55 item 1)
#   2. compile     bench/gpu_training.py --sections train trainer: eager against regional compilation
#                  (`deep-nmt train --torch-compile`: first-step time, step time, bf16 peak share)  (item 2)
#   3. depth row   one first-pass row of the depth study (ADMIN 18-6) at d 512 end to end (train, evaluate, score),
#                  timed, and the whole first pass projected from it                                 (item 6)
#   4. launch      the one-process NCCL commands of examples/accelerate/README.md: DDP and FSDP2 through
#                  `accelerate launch`, train and save                                              (item 5)
#   5. dlcl        bench/dlcl_throughput.py --device cuda: pre-LN / DLCL / DLCL before / DLCL fused  (item 4)
#   6. test_cuda   the CUDA tests
#   7. decode      bench/gpu_training.py --sections generate: eager, static cache + compile          (item 3)
#   8. serve       bench/gpu_training.py --sections generate --generate-precisions fp32 bf16 fp16 int8: base 6-6,
#                  MAtt 12-12 and Marian 6-6 in fp32 / bf16 / fp16 and int8 (torchao's dynamic int8 on CUDA; a row
#                  says "refused" where torchao is missing)                                     (issue #65 item 3)
# At most 8 files go to $OUT (the device tool's limit): run.log (the CUDA tests' output too), gpu_stalls.json,
# gpu_training.json, gpu_decode.json, gpu_serve.json, dlcl_throughput_cuda.json, launch_depth.json (the two
# launches' metrics, the depth row's record, its wall time and the projection). The markdown tables are redrawn here from the json:
#   python -c "import sys, json, pathlib, bench.lib.gpu.report as g; \
#     p = pathlib.Path(sys.argv[1]); p.with_suffix('.md').write_text(g.markdown(json.loads(p.read_text())))" FILE
# Before the call (the depth row reads Multi30k, which does not travel from ../shared):
#   mkdir -p .gpu_shared/data && cp -r ../shared/data/multi30k .gpu_shared/data/ && echo /.gpu_shared/ >> .git/info/exclude
#   and name .gpu_shared in the call's carry (with .whl where wheels are needed: ../shared/GPU.md).
# A part that did not fit (skipped, logged) runs in a second call with PARTS naming it, e.g. PARTS="dlcl test decode".
# Rehearse on a CPU first: QUICK=1 OUT=/tmp/gpu_check bash bench/gpu_check.sh (tiny shapes, about 10 minutes on 2
# shared cores). Run from the repository root; see bench/README.md, "GPU training bench".
set -u
OUT=${OUT:-bench/results/gpu_run}
mkdir -p "$OUT"
LOG="$OUT/run.log"
PY=${PYTHON:-python3}
QUICK=${QUICK:-}  # QUICK=1: the same commands as a CPU smoke run (tiny shapes), to check the script before a call
BUDGET=${BUDGET:-570}  # seconds for the whole call: a part that would start later is skipped
PARTS=${PARTS:-stalls compile depth launch dlcl test decode serve}  # e.g. PARTS="dlcl test decode" for a second call
START=$(date +%s)
WORK=$(mktemp -d /tmp/gpu_check.XXXXXX)  # the launches' data and outputs: fresh every call
if [ -d .whl ] && [ -z "$QUICK" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >> "$LOG" 2>&1 && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if [ -d .gpu_shared/data/multi30k ]; then export DEEP_NMT_SHARED_DIR=$PWD/.gpu_shared; fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD TOKENIZERS_PARALLELISM=false
export PYTHONUNBUFFERED=1 DEEP_NMT_BENCH_CACHE=${DEEP_NMT_BENCH_CACHE:-/tmp/deep_nmt_bench}
# inductor's cache fresh every call: time to the first compiled step is measured cold, and a cache another job left
# half-written ("file too short", seen in a CPU rehearsal beside the test suite) cannot fail the compile part
export TORCHINDUCTOR_CACHE_DIR=$WORK/inductor
# a rehearsal starts its depth row afresh (an earlier rehearsal's record would make it refuse without --reuse)
[ -n "$QUICK" ] && export DEEP_NMT_BENCH_CACHE=$WORK/bench-cache
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  "$PY" -c "import torch, transformers, accelerate; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__, 'accelerate', accelerate.__version__)" 2>&1
} >> "$LOG"
if [ -n "$QUICK" ]; then
  export TORCHINDUCTOR_COMPILE_THREADS=1  # no compile-worker pool on a small shared CPU
  DEV="--device cpu"; TRAIN_Q="--quick"; DLCL="--quick --no-counts --repeats 1"; STALL="--corpus 240 --precisions bf16"
  DEPTH="--quick --max-train-samples 200 --valid-sentences 20 --max-test-samples 20"
  DDP=examples/accelerate/cpu_ddp_2proc.yaml; FSDP=examples/accelerate/cpu_fsdp_2proc.yaml; STEPS=4
else
  DEV=""; TRAIN_Q=""; DLCL="--device cuda --profile"; STALL="--corpus 12000 --precisions bf16"
  DEPTH="--d-model 512 --epochs 2 --valid-sentences 200 --max-test-samples 500"
  DDP=examples/accelerate/ddp_1node.yaml; FSDP=examples/accelerate/fsdp.yaml; STEPS=20
fi
part() { echo "== $(date -u +%T) $*" >> "$LOG"; }
# run NAME SECONDS COMMAND...: under `timeout`, unless NAME's part is not in $PARTS or fewer than SECONDS / 3
# are left of the budget
run() {
  local name=$1 limit=$2; shift 2
  case " $PARTS " in *" ${name%%_*} "*) ;; *) part "$name not in PARTS"; return ;; esac
  local left=$((BUDGET - ($(date +%s) - START)))
  if [ "$left" -lt $((limit / 3)) ]; then part "$name skipped: ${left}s left of ${BUDGET}s"; return; fi
  [ "$left" -lt "$limit" ] && limit=$left
  part "$name (${limit}s)"
  timeout "$limit" "$@" >> "$LOG" 2>&1
  echo "$name rc=$?" >> "$LOG"
}

# 1) per-shape stalls (issue #55 item 1)
run stalls 150 "$PY" -m bench.gpu_training $DEV $TRAIN_Q --sections stalls $STALL --out "$OUT/gpu_stalls"
# 2) eager against regional compilation, raw loop and the deep-nmt train path (item 2)
run compile 120 "$PY" -m bench.gpu_training $DEV $TRAIN_Q --sections train trainer --precisions bf16 fp32 \
  --variants admin-18-6 base-6-6 --compile-variants admin-18-6 --compile-modes regions --trainer-variants admin-18-6 \
  --steps 8 --warmup 3 --no-references --budget-s 100 --out "$OUT/gpu_training"
# 3) one depth-study row at d 512, end to end, timed; the first pass projected from it (item 6)
ROW_START=$(date +%s)
run depth_row 150 "$PY" -m bench.depth_multi30k --only admin-18-6 --jobs 1 $DEPTH
ROW_WALL=$(($(date +%s) - ROW_START))
# 4) the one-process NCCL launches of examples/accelerate/README.md, train and save (item 5)
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
want launch && "$PY" -c "from deep_nmt_hf.data import write_parallel_dir; from deep_nmt_hf.data.synthetic import demo_splits, \
SRC_LANG, TGT_LANG; write_parallel_dir(demo_splits(train=256, valid=16, test=16, seed=7)['train'], '$WORK/gpu-data', \
'train', SRC_LANG, TGT_LANG)" >> "$LOG" 2>&1
TRAIN="-m deep_nmt_hf.cli train --data-dir $WORK/gpu-data --src-lang sa --tgt-lang sb --vocab-size 200 --variant dlcl \
--encoder-layers 6 --decoder-layers 2 --d-model 64 --heads 4 --ffn-dim 128 --batch-size 16 --max-steps $STEPS \
--logging-steps 5 --train-sampling random --num-beams 1 --no-progress"
run launch_ddp 45 accelerate launch --config_file $DDP --num_processes 1 $TRAIN --output-dir $WORK/out/gpu-ddp
run launch_fsdp 45 accelerate launch --config_file $FSDP --num_processes 1 $TRAIN --output-dir $WORK/out/gpu-fsdp
{ want launch || want depth; } && "$PY" - "$OUT/launch_depth.json" "$ROW_WALL" "$DEEP_NMT_BENCH_CACHE" "${QUICK:-}" "$WORK" >> "$LOG" 2>&1 <<'EOF'
import json, sys
from pathlib import Path

out, wall, cache, quick, work = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), bool(sys.argv[4]), sys.argv[5]
result = {"launch": {}, "depth_row": {"wall_s": wall}}
for name in ("gpu-ddp", "gpu-fsdp"):
    metrics = Path(work) / "out" / name / "metrics.json"
    saved = sorted(p.name for p in metrics.parent.glob("*")) if metrics.parent.is_dir() else []
    record = json.loads(metrics.read_text()) if metrics.is_file() else {}
    hyper = record.get("hyperparameters", {})
    result["launch"][name] = {
        "saved_files": saved,
        **{k: hyper.get(k) for k in ("world_size", "distributed_type", "global_batch_size")},
        "final_loss": next((e["loss"] for e in reversed(record.get("log_history", [])) if "loss" in e), None),
    }
records = cache / "depth-records-quick" if quick else Path("bench/results/depth_multi30k")
found = sorted(records.glob("e*/admin-18-6/seed1.json"), key=lambda p: p.stat().st_mtime)
if found:
    record = json.loads(found[-1].read_text())
    epochs = record["history"]
    host = [e.get("train_cpu_s", 0) + e.get("valid_decode_cpu_s", 0) for e in epochs]
    per_epoch = sum(host) / len(host)
    overhead = max(0.0, wall - sum(host))  # tokenizer, ADMIN profiling, final scoring, start-up
    row_30 = overhead + 30 * per_epoch
    # the other first-pass rows by their cost relative to ADMIN 18-6 in the committed CPU study (d 64, 30 epochs)
    from bench.lib.depth.rows import FIRST_PASS

    def cost(path):
        data = json.loads(path.read_text())
        return sum(e.get("train_cpu_s", 0) + e.get("valid_decode_cpu_s", 0) for e in data["history"])

    base = Path("bench/results/depth_multi30k/e30")
    costs = {row: cost(base / row / "seed1.json") for row in FIRST_PASS if (base / row / "seed1.json").is_file()}
    scale = {row: c / costs["admin-18-6"] for row, c in costs.items()} if "admin-18-6" in costs else {}
    first_pass = sum(overhead + 30 * per_epoch * s for s in scale.values())
    result["depth_row"] |= {
        "record": record,
        "host_s_per_epoch": per_epoch,
        "overhead_s": overhead,
        "projected_row_30_epochs_s": row_30,
        "first_pass_rows_scaled": len(scale),
        "projected_first_pass_s": first_pass,
        "projection": "row: overhead + 30 x the measured host seconds per epoch (host-bound: host time ~ wall); "
        "first pass: each row's cost relative to ADMIN 18-6 in the committed CPU study (e30, d 64) x that",
    }
out.write_text(json.dumps(result, indent=2, default=str) + "\n")
print("launch_depth:", json.dumps({k: v for k, v in result["depth_row"].items() if k != "record"}))
EOF
# 5) DLCL against pre-LN at 18-6, d 512, 25k target tokens, bf16 (goal <= 1.15x), the fused history product too
run dlcl 90 "$PY" -m bench.dlcl_throughput $DLCL
[ -z "$QUICK" ] && cp bench/results/dlcl_throughput_cuda.json "$OUT/" 2>/dev/null
# 6) the CUDA tests
if [ -z "$QUICK" ]; then
  run test_cuda 90 "$PY" -m pytest -q -p no:cacheprovider -m cuda tests/training/test_cuda.py
fi
# 7) generation: eager, static cache + compile (item 3)
run decode 90 "$PY" -m bench.gpu_training $DEV $TRAIN_Q --sections generate --variants admin-60-12 marian-6-6 \
  --compile-variants all --generate-repeats 1 --no-references --budget-s 80 --out "$OUT/gpu_decode"
# 8) serving precisions beside Marian: fp32 / bf16 / fp16 / int8 eager generate (issue #65 item 3)
run serve 60 "$PY" -m bench.gpu_training $DEV $TRAIN_Q --sections generate --variants base-6-6 matt-12-12 \
  --generate-precisions fp32 bf16 fp16 int8 --compile-variants --generate-repeats 2 --no-references --budget-s 55 \
  --out "$OUT/gpu_serve"
rm -f "$OUT"/*.png "$OUT"/*.md
part done
ls -la "$OUT" >> "$LOG"
