# A Python hyperparameter file (-conf x.py): the user's own code, run as such.
hyperparams = {
    "Pendulum-v1": dict(
        n_timesteps=40,
        policy="MlpPolicy",
        learning_starts=1000,
        gamma=0.9,
        policy_kwargs=dict(net_arch=[8], activation_fn="tanh"),
    ),
}
