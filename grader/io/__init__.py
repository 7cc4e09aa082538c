"""Readers and writers of the file formats in DESIGN.md.

TREC files have two readers whose answers and errors never differ: `trec_small` (plain Python,
small files, bench/evaluate_small.py) and `trec_arrow` (blocks of whole lines, every other file,
whole through `trec` or against indexed qrels through `run_stream`, bench/metrics_speed.py)."""
