"""Learners: pure functions over pytrees. Nothing here does I/O or keeps state between calls."""
