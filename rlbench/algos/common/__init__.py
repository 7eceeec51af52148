"""What two or more learners share: the Algorithm record and the Learner contract, config fields and RL Zoo
spellings, losses, target networks, schedules, the fused iteration, and the SAC family's learner (soft_*.py)."""
