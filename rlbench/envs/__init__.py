"""Gymnasium environments: construction, vector envs in SAME_STEP autoreset mode, the env spec."""
