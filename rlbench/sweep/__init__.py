"""Sweeps: a grid of runs (algos x envs x settings x seeds) on Ray, across cores, GPUs and machines.

- `grid`: the grid, its cells (one run folder each) and tasks (one process each), and the manifest;
- `packing`: seeds per process and CPUs/GPUs per process, chosen from the cluster;
- `cell`: one task on a Ray worker (resolve, train into a staging folder, report progress);
- `engine`: the driver (scheduling, retries, stopping, moving finished runs into the log root);
- `private_ray`: the private Ray instance of a sweep without --address (loopback only, its own folder);
- `report`: the returns report of a finished grid.

The command line is rlbench.sweep.command (`python -m rlbench.sweep`, `rlbench-sweep`).
"""
