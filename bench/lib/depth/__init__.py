"""The depth study (bench/depth_multi30k.py, its entry point and command line) in parts, each importing only the
ones above it in this list, never one below (bench/README.md):

- `rows`: the rows (`MODELS`) and the stages of the plan; `claims`: each paper's claims and the verdict rules.
- `core`: the study's settings and each row's recipe, where runs and records live, reading and writing them, what
  an epoch costs.
- `decision`: the one decision rule (the tests against 0 and against a target, their one Holm family under two
  df choices, the detectable Δ, the confounds); `sentences`: the summary sentences the READMEs quote, generated from the verdicts.
- `summaries`: a run's and a row's numbers from their records, and when a row fails; `pricing`: what is left and
  what it costs; `style`: how the figures draw a row.
- `study`: training and scoring a run, keeping its weights, the plan and the scheduler of the worker processes.
- `pilot`: the budget pilot's report; `report`: the study's report (it rebuilds the pilot's too).

Imported as `depth` with bench/lib on sys.path, as the scripts put it there.
"""
