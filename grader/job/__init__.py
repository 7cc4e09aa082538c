"""The grade job, one path for `relgrade grade` and `relgrade.grade`: typed options, checks,
the pairs, the judges, the store, the outputs and the outcome (`grader.job.grade`)."""
