"""Agreement statistics: kappa and alpha, inter-rater, bootstrap, system ranking, bias, PPI++."""
