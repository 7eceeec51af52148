"""The sweep's Ray cluster: a private instance on this machine or a running cluster, connected and let go,
and the checks that it can run the grid at all (an address that answers, a GPU where --device asks for one,
a node that fits one process).

Apart from the scheduling loop because each check runs once, before the sweep writes anything, and turns
what Ray would retry for minutes or leave pending forever into one line and exit 2.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

from rlbench.connectivity import connection_error
from rlbench.errors import ConfigError
from rlbench.run.device import split_device
from rlbench.sweep import private_ray
from rlbench.sweep.options import SweepOptions
from rlbench.sweep.packing import Packing, choose_packing, describe_need, fitting_nodes

POLL_S = 1.0  # how long the driver waits on Ray at a time: results, the board's events, a node joining


def where(address: str | None) -> str:
    """The cluster, as an error line names it."""
    return "this machine" if address is None else f"the cluster at --address {address}"


def check_reachable(address: str) -> None:
    """ConfigError (exit 2) unless `address` is HOST:PORT of something that accepts a connection."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--address {address}: expected auto or HOST:PORT (e.g. 10.0.0.1:6379)")
    error = connection_error(host.strip("[]"), int(port), timeout_s=5)
    if error is not None:
        raise ConfigError(
            f"--address {address}: no Ray cluster answers there ({error}); start one with "
            "`ray start --head`, or leave --address out for a private one on this machine"
        )


def connect(ray: ModuleType, address: str | None, device: str = "auto") -> None:
    """A private local Ray instance (address None), or the running cluster at `address`. `--device gpu:N`
    gives a private instance this machine's N-th GPU only (on a cluster Ray assigns each process its GPUs,
    and the command line refuses gpu:N)."""
    # Ray's own warnings reach the console (a task no node can run, a worker killed for memory): the tasks
    # send their own output to their log files, so nothing else comes through.
    settings: dict[str, Any] = {"log_to_driver": True, "configure_logging": False}
    if address is None:
        private_ray.start(ray, gpu=split_device(device)[1], **settings)  # loopback only, its own folder and token
        return
    try:
        ray.init(address=address, **settings)
    except ConnectionError as error:
        hint = "start one with `ray start --head`"
        raise ConfigError(f"--address {address}: no Ray cluster there ({error}); {hint}") from None


def disconnect(ray: ModuleType, address: str | None) -> None:
    if address is None:
        private_ray.stop(ray)
    else:
        ray.shutdown()


def pack(ray: ModuleType, n_seeds: int, device: str, options: SweepOptions) -> Packing:
    """The packing for the cluster (the flags override each part), once the cluster can run it: ConfigError
    (exit 2) for --device gpu where Ray sees no GPU, or when no node fits one process."""
    check_gpu_visible(ray, device, options.address)
    packing = choose_packing(
        ray.cluster_resources(),
        n_seeds,
        options.seeds_per_process,
        options.cpus_per_run,
        0 if options.gpus_per_run is None and split_device(device)[0] == "cpu" else options.gpus_per_run,
    )
    wait_for_a_fitting_node(ray, packing, options.address, options.node_wait_s)
    return packing


def check_gpu_visible(ray: ModuleType, device: str, address: str | None) -> None:
    """ConfigError (exit 2) for --device gpu/cuda on a cluster without a GPU that Ray can see."""
    if split_device(device)[0] in ("gpu", "cuda") and not ray.cluster_resources().get("GPU"):
        raise ConfigError(
            f"--device {device}: {where(address)} has no GPU that Ray can see; install rlbench[cuda] on a "
            "machine with an NVIDIA GPU, or use --device cpu/auto"
        )


def wait_for_a_fitting_node(ray: ModuleType, packing: Packing, address: str | None, node_wait_s: float) -> None:
    """ConfigError (exit 2, nothing written yet) when no node can ever run one process: at once on a
    private instance, after `node_wait_s` on a cluster. Ray itself would keep the tasks pending forever."""
    deadline = time.monotonic() + (0 if address is None else node_wait_s)
    announced = False
    while True:
        nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
        if fitting_nodes(packing, nodes):
            return
        if time.monotonic() >= deadline:
            waited = "" if address is None else f" after {node_wait_s:g} s"
            raise ConfigError(f"{where(address)}{waited}: {describe_need(packing, nodes)}")
        if not announced:
            need = describe_need(packing, nodes)
            print(f"Waiting up to {node_wait_s:g} s for a node that fits one process: {need}", flush=True)
            announced = True
        time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
