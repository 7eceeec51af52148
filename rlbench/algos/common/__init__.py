"""What two or more learners share: the Learner contract, config fields as typed values, losses, target
networks, schedules, quantile critics, the fused iteration. The soft family's learner is in rlbench/algos/soft;
RL Zoo's format of these settings is the boundary's: rlbench/config/algorithms/."""
