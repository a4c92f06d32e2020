"""The GPU training bench (`python -m bench.gpu_training`), by phase: `models` (what is measured), `syncs`,
`steps` (one timed step), `results` (the file), the phases `train_phase`, `trainer_phase`, `stalls`,
`generate_phase`, `split_phase`, and `report` (markdown, plot)."""
