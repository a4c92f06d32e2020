"""`python -m deep_nmt_hf.cli` (also under `accelerate launch` and torchrun)."""

from . import main

raise SystemExit(main())
