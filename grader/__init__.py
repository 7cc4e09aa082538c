"""relgrade: graded relevance labels from LLMs, validated, stored, calibrated and evaluated."""

__version__ = "0.1.0"
