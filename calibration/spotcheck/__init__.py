"""Spot checks: sampling with inclusion probabilities, the manifest, the blind CSV, Label Studio,
and the annotation page people grade in."""
