"""Soft actor-critic (Haarnoja et al. 2018); DroQ is this learner with a preset (see registry)."""
