"""`python -m deep_nmt_hf.cli` (also under `accelerate launch` and torchrun)."""

from ..training.distributed import exit_if_a_rank
from . import main

code = main()
exit_if_a_rank(code)  # a rank of a launched run ends here (deep_nmt_hf/training/distributed.py says why)
raise SystemExit(code)
