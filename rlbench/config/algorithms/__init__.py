"""Each algorithm's hyperparameter keys as RL Zoo's files write them: its key set, the reader that checks an
entry into the algorithm's typed config and the writer back to the file format, its preset, and its
`Algorithm` value, which joins them to the learner in rlbench/algos/<algo>/. shared.py and soft.py hold what
several algorithms read."""
