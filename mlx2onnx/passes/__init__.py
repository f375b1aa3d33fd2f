"""Passes: optional clean-up and fusion on the assembled model, in one ordered pipeline."""
