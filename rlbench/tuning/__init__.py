"""Hyperparameter tuning with Optuna: search spaces, storage with heartbeats, workers, reports."""
