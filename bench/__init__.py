"""Benchmarks of Log Agent against the tools users would otherwise pick; run with `python -m bench`."""
