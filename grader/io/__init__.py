"""Readers and writers of the file formats in DESIGN.md. `.gz` is handled transparently."""
