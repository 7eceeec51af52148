"""Training, when the schedule says so: the staged transitions go to the replay buffer, and with them one
fused device call trains and chooses the next action (train_freq in steps), or gradient steps follow
episode ends (train_freq in episodes: rlbench.loop.schedule)."""

from __future__ import annotations

import numpy as np

from rlbench.loop.collect import episode_starts
from rlbench.loop.compiled import Carry, IterationInputs
from rlbench.loop.run_state import LoopRun


def train_if_due(loop: LoopRun, episode_ended: bool) -> bool:
    """Once the staging is full: insert its transitions and train if due. Returns whether it trained."""
    host, programs, schedule = loop.host, loop.programs, loop.schedule
    if not host.pending.full:
        return False
    new = loop.axis.device(host.pending.take())
    if schedule.fused_update_due(host):
        obs, normalization = loop.policy_inputs()
        inputs = IterationInputs(
            new, loop.progress_remaining(), obs, host.act_key, normalization, loop.training, episode_starts(loop)
        )
        assert isinstance(loop.carry, Carry), "the host loop's training iteration (the device loop trains in its chunk)"
        loop.carry, outputs = programs.update(loop.carry, inputs)
        host.metrics, host.next_action, host.act_key = outputs
        return True
    loop.carry = loop.carry._replace(buffer_state=programs.insert(loop.carry.buffer_state, new))
    calls = schedule.gradient_step_calls(host, episode_ended)
    for n_steps in calls:  # the next step acts with the trained policy (host.next_action stays None)
        assert programs.train_steps is not None, "train_freq in episodes is an off-policy learner's"
        loop.state, host.metrics = programs.train_steps(
            loop.state, loop.carry.buffer_state, loop.progress_remaining(), loop.normalization(), np.int32(n_steps)
        )
    return bool(calls)
