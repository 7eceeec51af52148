"""Run by the SBX peer's Python (not rlbench's): one gradient step of SBX's own DQN (`DQN.update_qnetwork`) on
the parameters, target parameters and batch an npz file gives, with SGD at learning rate 1 in place of Adam, so
that each parameter's change is minus its gradient. Writes the changes, the loss and the mean Q to a second
npz, under rlbench's names. Usage: python sbx_dqn_step.py IN.npz OUT.npz

Written against SBX 0.28 (sbx.dqn.policies.QNetwork: Dense_0, Dense_1 of n_units, Dense_2 the output).
rlbench's ActionValues names them trunk/Dense_0, trunk/Dense_1 and q.
"""

import sys

import jax.numpy as jnp
import numpy as np
import optax
from sbx import DQN
from sbx.common.type_aliases import RLTrainState
from sbx.dqn.policies import QNetwork

OURS = {"Dense_0": "trunk/Dense_0", "Dense_1": "trunk/Dense_1", "Dense_2": "q"}


def sbx_params(data, prefix: str) -> dict:
    return {
        "params": {
            theirs: {leaf: jnp.asarray(data[f"{prefix}/{ours}/{leaf}"]) for leaf in ("kernel", "bias")}
            for theirs, ours in OURS.items()
        }
    }


def step(data) -> dict[str, np.ndarray]:
    network = QNetwork(n_actions=int(data["n_actions"]), n_units=int(data["n_units"]))
    sgd = optax.sgd(1.0)  # new = old - gradient
    params = sbx_params(data, "init")
    state = RLTrainState.create(apply_fn=network.apply, params=params, target_params=sbx_params(data, "target"), tx=sgd)
    batch_size = len(data["batch/reward"])
    state, (loss, q_mean) = DQN.update_qnetwork(
        state,
        data["batch/obs"],
        data["batch/action"].astype(np.int32).reshape(batch_size, 1),
        data["batch/next_obs"],
        data["batch/reward"],
        data["batch/terminated"],
        np.full(batch_size, float(data["gamma"]), np.float32),
    )
    out = {"loss": np.asarray(loss), "q_mean": np.asarray(q_mean)}
    for theirs, ours in OURS.items():
        for leaf in ("kernel", "bias"):
            before = params["params"][theirs][leaf]
            out[f"grad/{ours}/{leaf}"] = np.asarray(before - state.params["params"][theirs][leaf])
    return out


if __name__ == "__main__":
    np.savez(sys.argv[2], **step(dict(np.load(sys.argv[1]))))
