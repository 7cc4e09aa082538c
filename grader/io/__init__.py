"""Readers and writers of the file formats in DESIGN.md; `.gz` is read transparently.

TREC runs and qrels have two readers, and the answer and the error never depend on which ran:
`trec_small` (plain Python, files up to `SMALL_BYTES` that it reads exactly as the Arrow reader
does: importing pyarrow costs more than scoring such a run, bench/evaluate_small.py) and
`trec_arrow` (pyarrow's CSV reader on blocks of whole lines: every other file, whole through
`trec` or block by block against indexed qrels through `run_stream`, bench/metrics_speed.py).
`trec_lines` names the first bad line of a rejected block in one block's memory
(bench/bad_input_memory.py); `duplicates` names both lines of a (query, doc) given twice.
"""
