"""Pieces shared by SAC, DroQ and CrossQ: losses, the gradient-step helper, Polyak averaging, schedules."""
