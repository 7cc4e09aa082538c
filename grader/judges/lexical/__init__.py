"""The offline `lexical` judge: a BM25-style baseline, its settings file and threshold fitting."""

from grader.judges.lexical.config import write_thresholds
from grader.judges.lexical.judge import LexicalJudge

__all__ = ["LexicalJudge", "write_thresholds"]
