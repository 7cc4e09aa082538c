"""Reports for people: rich tables for the terminal, the self-contained HTML pages (calibration,
regrade diff) filled from the template files in `templates/`, and their plots."""
