"""PPO and A2C (a preset): rollout GAE, the clipped loss and the fused epochs of minibatch steps."""
