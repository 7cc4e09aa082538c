"""Toy plug-ins added through docs/adding-a-judge.md and docs/adding-a-measure.md only."""
