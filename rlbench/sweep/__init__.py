"""Sweeps: a grid of runs (algos x envs x settings x seeds) on Ray, across cores, GPUs and machines.

- `grid`: the grid, its cells (one run folder each) and tasks (one process each), the sweep's names;
- `manifest`: the manifest file, each cell's state, read back as untrusted input;
- `options`: how a sweep runs (nothing that changes its results);
- `packing`: seeds per process and CPUs/GPUs per process, chosen from the cluster;
- `cluster`: the private Ray instance or the cluster, connected, and the checks that it can run the grid;
- `engine`: the driver of one invocation (what to run, every check before the first write, the summary);
- `scheduler`: the scheduling loop (submit, collect, retry, stop);
- `board`: the Ray actor the tasks report their events to, and that carries the driver's stop;
- `moves`: finished runs moved into the log root, crash-safe (`moved.json`);
- `cell`: one task on a Ray worker (resolve, train into a staging folder, report progress);
- `private_ray`: the private Ray instance of a sweep without --address (loopback only, its own folder);
- `progress`: the live view; `report`: the returns report of a finished grid.

The command line is rlbench.sweep.command (`python -m rlbench.sweep`, `rlbench-sweep`).
"""
