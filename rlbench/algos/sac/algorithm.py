"""SAC, and DroQ as SAC with a preset: no code of its own."""

from rlbench.algos.common.algorithm import Algorithm
from rlbench.algos.sac.config import DROQ_PRESET, KEYS, build_config, config_to_hyperparams
from rlbench.algos.sac.update import make_learner

SAC = Algorithm("sac", KEYS, build_config, config_to_hyperparams, make_learner)
DROQ = Algorithm("droq", KEYS, build_config, config_to_hyperparams, make_learner, preset=DROQ_PRESET)
