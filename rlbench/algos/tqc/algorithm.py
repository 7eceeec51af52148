"""TQC: the SAC family's learner with quantile critics and TQC's objective."""

from rlbench.algos.common.algorithm import Algorithm
from rlbench.algos.tqc.config import KEYS, build_config, config_to_hyperparams
from rlbench.algos.tqc.update import make_learner

TQC = Algorithm("tqc", KEYS, build_config, config_to_hyperparams, make_learner)
