"""The annotation page: a local server where people grade a blind sample in the browser, each grade
saved at once to the annotator's grade log, with the scale's meanings from a prompt file."""
