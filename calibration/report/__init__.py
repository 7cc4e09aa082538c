"""Reports for people: rich tables for the terminal, the self-contained HTML page and its plots."""
