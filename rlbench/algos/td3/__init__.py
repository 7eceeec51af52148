"""TD3 (Fujimoto et al. 2018) as SB3 and SBX define it; DDPG is this learner with a preset (see algorithm.py)."""
