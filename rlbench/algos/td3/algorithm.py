"""TD3, and DDPG as TD3 with a preset: no code of its own."""

from rlbench.algos.common.algorithm import Algorithm
from rlbench.algos.td3.config import DDPG_PRESET, KEYS, build_config, config_to_hyperparams
from rlbench.algos.td3.update import make_learner

TD3 = Algorithm("td3", KEYS, build_config, config_to_hyperparams, make_learner)
DDPG = Algorithm("ddpg", KEYS, build_config, config_to_hyperparams, make_learner, preset=DDPG_PRESET)
