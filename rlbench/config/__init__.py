"""Stage 1, text to typed settings: hyperparameter files and `-params` literals read safely, and an entry
normalized and split into run keys, env wrappers and learner keys."""
