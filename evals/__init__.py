"""Quality evaluations of Log Agent (grouping and localisation); run with `python -m evals`."""
