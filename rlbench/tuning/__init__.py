"""Hyperparameter tuning with Optuna: search spaces, storage with heartbeats, workers, reports."""

# Liveness of a trial, here so that the CLI can show the defaults without importing Optuna: a running
# trial beats every HEARTBEAT_S; one silent for longer than the grace (--heartbeat-grace) is a dead worker's.
HEARTBEAT_S = 2
GRACE_S = 10
