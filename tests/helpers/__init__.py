"""Helpers several test modules share."""
