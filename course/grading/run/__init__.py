"""A grading run: the course folder's layout, the plan's ledger, the workers, the gradebooks they merge into, compiling ahead and the audit's clean re-runs."""
