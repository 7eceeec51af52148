"""CrossQ: its own critic and actor steps; everything else shared with the SAC family."""

from rlbench.algos.common.algorithm import Algorithm
from rlbench.algos.crossq.config import CROSSQ_PRESET, KEYS, build_config, config_to_hyperparams
from rlbench.algos.crossq.update import make_learner

CROSSQ = Algorithm("crossq", KEYS, build_config, config_to_hyperparams, make_learner, preset=CROSSQ_PRESET)
