"""Environments written in JAX (gymnax, Brax, MuJoCo Playground): reset and step are pure functions of one env,
so the device loop vmaps them over envs and seeds and scans them with the learner's update."""
