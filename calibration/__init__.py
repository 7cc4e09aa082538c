"""Calibration: how far the LLM's grades can be trusted, measured against people's grades.

`stats/` (agreement, inter-rater, bootstrap, system ranking, bias, PPI++ estimates), `spotcheck/`
(what people should grade, and the page they grade it in) and `report/` (tables, HTML, plots);
`summary.py` ties them into what `relgrade calibrate` reports. A library over grader's data model,
readers and metrics: it never imports the CLI, and grader's library never imports it.
"""
