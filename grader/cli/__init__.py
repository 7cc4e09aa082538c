"""The command line: the top floor, the only place that prints and picks exit codes."""
