"""Calibration: how far the LLM's grades can be trusted, measured against people's grades.
`stats/` (the figures), `spotcheck/` (what people grade, and where), `report/` (tables, HTML);
`summary.py` ties them into what `relgrade calibrate` reports. grader never imports it."""
