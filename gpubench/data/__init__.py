"""Batches for training: synthetic ones for speed runs (real data sets live beside them)."""
