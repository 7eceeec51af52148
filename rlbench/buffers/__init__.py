"""Replay buffers as frozen bundles of pure functions over a pytree state (the Flashbax shape)."""
