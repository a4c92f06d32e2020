"""A folded checkpoint saved by one Transformers release translates identically on another (issue 24).

    python tests/folded_across_releases.py write DIR   # with the newest release: fold, save, record outputs
    python tests/folded_across_releases.py check DIR   # with the lowest release: load, decode, compare

`write` trains a tiny ADMIN model a few steps (so its outputs vary), sets every ω ≠ 1, folds it into MarianMTModel,
saves it to DIR with the inputs and the greedy and beam-4 outputs (tokens and sequence scores). `check` loads DIR
with AutoModelForSeq2SeqLM without importing deep_nmt_hf, decodes the same inputs and exits 1 unless the tokens are
identical and the scores agree within 1e-4. .ci/run calls it across its two environments.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

RECORD = "across_releases.json"
SEARCHES = {"greedy": dict(num_beams=1), "beam4": dict(num_beams=4)}


def decode(model, inputs: dict[str, torch.Tensor]) -> dict[str, dict[str, list]]:
    outputs = {}
    for name, search in SEARCHES.items():
        out = model.generate(
            **inputs,
            **search,
            do_sample=False,
            max_new_tokens=10,
            output_scores=True,
            return_dict_in_generate=True,
        )
        scores = (
            out.sequences_scores if search["num_beams"] > 1 else torch.stack(out.scores, 1).amax(-1).sum(-1)
        )
        outputs[name] = {"tokens": out.sequences.tolist(), "scores": scores.tolist()}
    return outputs


def write(directory: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import transformers
    from factories import counting_task_model, padded_batch, randomise_omegas

    from deep_nmt_hf.publish.folding import fold_to_stock

    model = counting_task_model("admin", admin_omega="trainable")
    randomise_omegas(model, torch.Generator().manual_seed(7), low=0.5, high=2.5)
    stock, report = fold_to_stock(model)
    ids, mask = padded_batch([7, 5, 8, 4], seed=21)
    stock.save_pretrained(directory)
    record = {
        "transformers": transformers.__version__,
        "fold": {"stock_class": report.stock_class, "max_abs_logit_diff": report.max_abs_logit_diff},
        "inputs": {"input_ids": ids.tolist(), "attention_mask": mask.tolist()},
        "outputs": decode(stock, {"input_ids": ids, "attention_mask": mask}),
    }
    (directory / RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
    print(f"folded {report.stock_class} saved with transformers {transformers.__version__} in {directory}")


def check(directory: Path) -> int:
    import transformers
    from transformers import AutoModelForSeq2SeqLM

    record = json.loads((directory / RECORD).read_text(encoding="utf-8"))
    model = AutoModelForSeq2SeqLM.from_pretrained(directory).eval()
    assert "deep_nmt_hf" not in sys.modules, "the folded checkpoint must load without the package"
    inputs = {name: torch.tensor(value) for name, value in record["inputs"].items()}
    outputs = decode(model, inputs)
    failures = []
    for name, expected in record["outputs"].items():
        if outputs[name]["tokens"] != expected["tokens"]:
            failures.append(f"{name}: tokens {outputs[name]['tokens']} != {expected['tokens']}")
        difference = max(abs(a - b) for a, b in zip(outputs[name]["scores"], expected["scores"], strict=True))
        if difference > 1e-4:
            failures.append(f"{name}: scores differ by {difference:.2e} (allowed 1e-4)")
    saved, loaded = record["transformers"], transformers.__version__
    if failures:
        print(
            f"folded {type(model).__name__} saved with transformers {saved} differs on {loaded}:", *failures
        )
        return 1
    print(f"folded {type(model).__name__} saved with transformers {saved} translates identically on {loaded}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    target = Path(sys.argv[2])
    if sys.argv[1] == "write":
        write(target)
    else:
        sys.exit(check(target))
