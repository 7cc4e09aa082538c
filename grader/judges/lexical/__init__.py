"""The offline `lexical` judge: a BM25-style baseline, its settings file and threshold fitting."""
