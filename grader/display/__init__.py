"""What the grade job draws while it runs, for the command and the Python API alike."""
