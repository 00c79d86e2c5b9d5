"""The instructor's side, by role: commands/ (one module per command; cli.py parses them), nbgrader/ (the plug-ins
nbgrader_config.py names), run/ (a grading run: plan, workers, ledger, gradebooks), cluster/ (shards, Slurm), reports/
(what the instructor reads of a graded class)."""
