#!/usr/bin/env bash
# One device call of at most 9 minutes on a CUDA machine (issue #48): the CUDA tests, DLCL's step against pre-LN,
# then bench/gpu_training.py at the papers' shapes under a time budget. At most 8 result files go to $OUT (default
# bench/results/gpu_run): run.log, test_cuda.txt and the benches' json / md (plots are redrawn from the json here).
#   run: bash bench/gpu_check.sh        (from the repository root; see bench/README.md, "GPU training bench")
# Wheels in .whl/ (a node without network; ../shared/GPU.md) are installed into /tmp/site first.
# Each part has its own `timeout`, so one hang does not cost the rest; the bench writes its json after every row.
set -u
OUT=${OUT:-bench/results/gpu_run}
mkdir -p "$OUT"
LOG="$OUT/run.log"
PY=${PYTHON:-python3}
QUICK=${QUICK:-}  # QUICK=1: the same commands as a CPU smoke run (tiny shapes), to check the script before a call
if [ -d .whl ] && [ -z "$QUICK" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >> "$LOG" 2>&1 && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD TOKENIZERS_PARALLELISM=false
export PYTHONUNBUFFERED=1
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  "$PY" -c "import torch, transformers, accelerate; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__, 'accelerate', accelerate.__version__)" 2>&1
} >> "$LOG"
if [ -n "$QUICK" ]; then
  DEV="--device cpu"; TRAIN_Q="--quick"; DLCL="--quick --no-counts"
else
  DEV=""; TRAIN_Q=""; DLCL="--device cuda --profile"
fi
part() { echo "== $(date -u +%T) $*" >> "$LOG"; }
part test_cuda
timeout 100 "$PY" -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda.py > "$OUT/test_cuda.txt" 2>&1
echo "test_cuda rc=$?" >> "$OUT/test_cuda.txt"
# DLCL against pre-LN at 18-6, d 512, 25k target tokens, bf16 (goal ≤ 1.15×)
part dlcl_throughput
timeout 60 "$PY" bench/dlcl_throughput.py $DLCL >> "$LOG" 2>&1
echo "dlcl rc=$?" >> "$LOG"
cp bench/results/dlcl_throughput_cuda.json bench/results/dlcl_throughput_cuda.md "$OUT/" 2>/dev/null
# 1) the case first: host split + deep-nmt train path against the raw loop (ADMIN 18-6, 8k tokens),
#    eager bf16 / fp32 rows of every variant; compiled rows only for the models
part gpu_training
timeout 230 "$PY" bench/gpu_training.py $DEV $TRAIN_Q --sections split trainer train --precisions bf16 fp32 \
  --compile-variants admin-18-6 base-6-6 --steps 8 --warmup 3 --budget-s 200 \
  --out "$OUT/gpu_training_cuda" >> "$LOG" 2>&1
echo "gpu_training rc=$?" >> "$LOG"
# 2) fp16, generation (eager and static cache + compile) with what is left
part gpu_training_extra
timeout 110 "$PY" bench/gpu_training.py $DEV $TRAIN_Q --sections generate train --precisions fp16 \
  --compile-variants matt-12-12 --generate-repeats 1 --steps 5 --warmup 2 --budget-s 90 --no-references \
  --out "$OUT/gpu_training_cuda_extra" >> "$LOG" 2>&1
echo "gpu_training extra rc=$?" >> "$LOG"
rm -f "$OUT"/*.png "$OUT/gpu_training_cuda_extra.md"
part done
ls -la "$OUT" >> "$LOG"
