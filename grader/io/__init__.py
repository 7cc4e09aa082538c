"""Readers and writers of the file formats in DESIGN.md. `.gz` is handled transparently.

TREC runs and qrels: which reader reads what, and why. Two readers parse them, and the answer
and the error (file, line, fix) never depend on which one ran:

- `trec_small`, plain Python: the qrels and runs of `relgrade evaluate` of up to `SMALL_BYTES`
  of text that it reads exactly as the Arrow reader does (tests/test_trec_small.py). Importing
  pyarrow costs more than reading and scoring such a run, so a small run is scored without it
  (the start-up goal of bench/evaluate_small.py). It never raises: any other file, every bad
  one among them, is left to the Arrow reader.
- `trec_arrow`, pyarrow's CSV reader fed blocks of whole lines: every other file. Through
  `trec` (`read_run`, `read_qrels`, `read_qrels_columns`: a whole file, for `grade`,
  `calibrate` and the Python API) and through `run_stream` (a run against indexed qrels, block
  by block, keeping only its judged rows: `relgrade evaluate` of a large run in less time and
  memory than trec_eval, bench/metrics_speed.py). A file with one separator is read at Arrow
  speed; an irregular one (repeated or mixed spaces and tabs, a byte order mark) has each block's
  whitespace normalised first.

Beside them, not readers: `trec_lines` cuts a file into blocks of whole lines and, for a block
Arrow rejects, checks its lines one by one, so the first bad line is named in one block's memory
(bench/bad_input_memory.py); `duplicates` names both lines of a (query, doc) given twice; `trec`
also writes runs and qrels.
"""
