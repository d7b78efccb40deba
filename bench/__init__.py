"""Benchmarks: each compares side by side in one run and reports ratios. Run from the repo root."""
