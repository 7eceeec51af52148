"""Flax (linen) modules: the trunks (MLP, SimBa), the squashed Gaussian actor and the critic ensemble."""
