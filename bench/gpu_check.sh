#!/usr/bin/env bash
# One device call of at most 8 minutes on a CUDA machine (issue #48): the CUDA tests, then bench/gpu_training.py at
# the papers' shapes under a time budget. Results (at most 8 files) go to $OUT (default bench/results/gpu_run).
#   run: bash bench/gpu_check.sh        (from the repository root; see bench/README.md, "GPU training bench")
# Each part has its own `timeout`, so one hang does not cost the rest; the bench writes its json after every row.
set -u
OUT=${OUT:-bench/results/gpu_run}
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD TOKENIZERS_PARALLELISM=false
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/nvidia_smi.csv" 2>&1
if [ -f tests/test_cuda.py ]; then
  timeout 90 "$PY" -m pytest -q -m cuda tests/test_cuda.py > "$OUT/test_cuda.txt" 2>&1
  echo "test_cuda rc=$?" >> "$OUT/test_cuda.txt"
else
  echo "tests/test_cuda.py not found" > "$OUT/test_cuda.txt"
fi
# 1) the case first: host split + deep-nmt train path against the raw loop (ADMIN 18-6, 8k tokens),
#    eager bf16 / fp32 rows of every variant, generation eager; compiled rows only for the models
timeout 250 "$PY" bench/gpu_training.py --sections split trainer train --precisions bf16 fp32 \
  --compile-variants admin-18-6 base-6-6 --steps 8 --warmup 3 --budget-s 220 \
  --out "$OUT/gpu_training_cuda" > "$OUT/gpu_training_cuda.log" 2>&1
echo "gpu_training rc=$?" >> "$OUT/gpu_training_cuda.log"
# 2) fp16, compiled rows of the other variants and generation (eager and static cache + compile) with what is left
timeout 150 "$PY" bench/gpu_training.py --sections generate train --precisions fp16 \
  --compile-variants admin-18-6 matt-12-12 --generate-repeats 1 --steps 5 --warmup 2 --budget-s 130 --no-references \
  --out "$OUT/gpu_training_cuda_extra" > "$OUT/gpu_training_cuda_extra.log" 2>&1
echo "gpu_training extra rc=$?" >> "$OUT/gpu_training_cuda_extra.log"
ls -la "$OUT"
