#!/usr/bin/env bash
# Fetch, here (where pip reaches the registry), the wheels a GPU device session needs beyond its image,
# into .whl/ (ignored by git). The device image already has Python 3.12 with jax (CUDA), flax, optax,
# numpy, pyyaml, rich, msgpack, matplotlib, scipy, torch, cloudpickle and absl-py; it lacks the MuJoCo
# envs and the SBX peer. scripts/gpu_bench.sh installs these wheels there and runs the speed benchmark.
#
# Usage: bash scripts/device_wheels.sh [DEST]      (then see scripts/gpu_bench.sh)
set -euo pipefail
dest=${1:-.whl}
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
  platforms+=(--platform "${tag}_x86_64")
done
fetch() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$dest" "$@"
}
# The environments: gymnasium with MuJoCo (mujoco 4 splits into core + studio; studio needs websockets).
fetch gymnasium==1.4.0 farama-notifications==0.0.6 mujoco==4.0.0 mujoco-core==4.0.0 mujoco-studio==4.0.0 \
  websockets==17.4 glfw==2.11.0 pyopengl==3.1.10
# rlbench's compilation cache locks its entries with filelock (pure Python; the image may lack it).
fetch filelock==3.20.0
# The peer, SBX 0.28 (never an rlbench dependency): stable-baselines3 (torch is in the image) and
# tfp-nightly for its distributions, with tfp's small dependencies.
fetch sbx-rl==0.28.0 stable-baselines3==2.9.2 tfp-nightly==0.26.0.dev20261027 decorator==5.3.1 dm-tree==0.1.10 \
  gast==0.7.0
# JAX-native envs for the device loop's phase (Brax; its import-time dependencies the image lacks). Not
# Playground: it needs NVIDIA warp (392 MB installed), beyond the device carry.
fetch brax==0.14.2 mujoco-mjx==3.17.0 etils==1.15.0 jaxopt==0.8.5 trimesh==5.2.0 xxhash==4.1.0
# The peer's benchmark script travels with the wheels (../shared beside the repository does not).
cp "$(dirname "$0")/../../shared/bench/sbx_speed.py" "$dest/"
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
du -sh "$dest"
ls "$dest"
