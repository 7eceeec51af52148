"""PPO, and A2C as PPO with A2C's preset (rlbench.algos.ppo.config): on-policy learners that act in Box and
Discrete action spaces."""

from rlbench.algos.common.algorithm import Algorithm
from rlbench.algos.ppo.learner import make_learner
from rlbench.algos.ppo.spelling import (
    A2C_KEYS,
    ARCHITECTURE_KEYS,
    PPO_KEYS,
    a2c_hyperparams,
    ppo_hyperparams,
    read_a2c,
    read_ppo,
)

ON_POLICY_SPACES = ("Box", "Discrete")
PPO = Algorithm(
    "ppo", PPO_KEYS, read_ppo, ppo_hyperparams, make_learner,
    architecture_keys=ARCHITECTURE_KEYS, action_spaces=ON_POLICY_SPACES, log_interval=1,
)  # fmt: skip
A2C = Algorithm(
    "a2c", A2C_KEYS, read_a2c, a2c_hyperparams, make_learner,
    architecture_keys=ARCHITECTURE_KEYS, action_spaces=ON_POLICY_SPACES, log_interval=100,
)  # fmt: skip
