"""Integration tests: real train.py/enjoy.py runs (in-process or as processes), signals, storages, W&B files."""
