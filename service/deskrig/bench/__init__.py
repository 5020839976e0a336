"""Benchmarks behind ``scripts/bench``: each suite prints a table of latencies and ratios."""
