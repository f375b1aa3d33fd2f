"""Verify: run the model in a runtime and the function in MLX, compare; localize a mismatch."""
