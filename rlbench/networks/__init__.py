"""Flax (linen) modules: an MLP trunk, the squashed Gaussian actor and the critic ensemble."""
