"""`python enjoy.py`: replay a trained agent (RL Zoo's enjoy flags), optionally recording an mp4.

The policy is rebuilt from the checkpoint's manifest. The run's saved config.yml is read only for
the env's kwargs and wrappers, with the same literal-only parsing as training (a YAML tag or code in
it exits 2). `scripts/record_video.py` is this command with RL Zoo's record_video flags
(`main(record_video=True)`). Exit codes: 0 success, 1 missing or corrupt model, 2 bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from rlbench.cli.flags import Group, flag, parser_from, shared
from rlbench.config import hyperparams
from rlbench.config.entry import entry_env_wrappers, normalize_entry
from rlbench.config.literals import parse_key_values
from rlbench.config.values import literal_mapping
from rlbench.envs.checks import check_env_id, check_env_runs
from rlbench.envs.envpool_vector import rendered_env_id
from rlbench.envs.make import env_file_name, make_single_env
from rlbench.envs.reported import env_reports_episodes
from rlbench.envs.video import VideoWriter, find_ffmpeg
from rlbench.envs.wrappers import EnvWrapper, trusted_modules
from rlbench.errors import ConfigError
from rlbench.loggers.monitor import MonitorFiles
from rlbench.run import compile_cache
from rlbench.run.device import select_device
from rlbench.run.exit_codes import STOPPING_ERRORS, exit_code
from rlbench.run.outputs import latest_run_id
from rlbench.store.checkpoint import CheckpointError, newest_valid_checkpoint, periodic_checkpoints, read_checkpoint
from rlbench.store.expectations import policy_expectations
from rlbench.store.manifest import Manifest

if TYPE_CHECKING:
    from rlbench.run.policy import Policy

RECORD_VIDEO_DESCRIPTION = "Record a trained agent to an mp4, headless (RL Zoo's record_video, on enjoy.py's loader)."


ENJOY_FLAGS = (
    shared("env", help="gymnasium environment id"),
    shared("algo", help="algorithm the model was trained with"),
    flag("-f", "--folder", default="logs", help="log folder (the -f of train.py)"),
    flag("--exp-id", type=int, default=0, help="run number: 0 the latest, -1 no run folder"),
    shared("n_timesteps", default=1000, help="env steps to run"),
    flag("--n-envs", type=int, default=1, help="number of envs (only the first is rendered)"),
    flag("--no-render", action="store_true", help="no window (default when there is no display)"),
    flag(
        "--deterministic",
        action="store_true",
        default=True,
        help="the policy's mean action (the default for continuous control)",
    ),
    flag("--stochastic", action="store_true", help="sample actions from the policy"),
    flag(
        "--norm-reward",
        action="store_true",
        help="with a model trained with normalize: show rewards scaled by its saved return statistics "
        "(reward / sqrt(var + epsilon), clipped), as training saw them; Monitor files (--reward-log) keep the env's",
    ),
    Group(
        (
            flag("--load-best", action="store_true", help="load best_model.zip"),
            flag("--load-checkpoint", type=int, metavar="N", help="load rl_model_<N>_steps.zip"),
            flag(
                "--load-last-checkpoint",
                action="store_true",
                help="load the newest valid rl_model_*_steps.zip (torn ones are skipped, with a warning)",
            ),
        ),
        exclusive=True,
    ),
    shared("seed", default=0, help="env (and stochastic-action) seed"),
    shared("env_kwargs", default=None, help="env kwargs; override the run's saved env_kwargs"),
    shared("gym_packages", help="modules to import first (their wrappers are trusted in env_wrapper)"),
    shared(
        "trust_wrappers",
        help="modules whose wrappers the run's config.yml may name, besides gymnasium's and rlbench's",
    ),
)
RECORD_FLAG = flag(
    "--record",
    default=None,
    metavar="PATH.mp4",
    help="write the first env's frames to an mp4 (headless: MuJoCo via EGL, PyBullet's renderer)",
)
RECORD_VIDEO_FLAG = flag(  # record_video.py's, instead of --record
    "-o",
    "--output-folder",
    default=None,
    metavar="FOLDER",
    help="folder for the video, named as RL Zoo names it (final-model-<algo>-<env>-step-0-to-"
    "step-<n>.mp4, best-model-..., checkpoint-<steps>-...); default: <run folder>/videos. "
    "A path ending in .mp4 or .gif is the video file itself",
)
PROCESS_FLAGS = (
    shared("device", default="cpu", help="JAX backend: cpu, auto, gpu, or gpu:N (cuda:N)"),
    shared("compile_cache", help="persistent compilation cache folder, as train.py's (none turns it off)"),
    shared(
        "num_threads",
        choices=(-1, 1),
        help="-1: XLA's default (all cores); 1: single-threaded XLA on CPU (as train.py's)",
    ),
    flag(
        "--reward-log",
        default="",
        metavar="DIR",
        help="write each env's episodes to DIR/<index>.monitor.csv (SB3's Monitor file, as RL Zoo)",
    ),
    flag(
        "--custom-objects",
        action="store_true",
        help="accepted for RL Zoo's command lines and not needed: a checkpoint holds arrays and a "
        "manifest, nothing pickled",
    ),
    shared("progress", help="show a progress bar"),
    shared("verbose", help=None),
)


def build_parser(record_video: bool = False) -> argparse.ArgumentParser:
    """enjoy.py's flags; with `record_video`, record_video.py's: -o/--output-folder instead of --record."""
    table = (*ENJOY_FLAGS, RECORD_VIDEO_FLAG if record_video else RECORD_FLAG, *PROCESS_FLAGS)
    if record_video:
        return parser_from(table, prog="record_video.py", description=RECORD_VIDEO_DESCRIPTION)
    return parser_from(table, prog="enjoy.py", description=__doc__.splitlines()[0])


def find_model(args: argparse.Namespace) -> Path:
    """The model file RL Zoo's flags point to: <env_id>.zip by default."""
    env_name = env_file_name(args.env)
    run_dir = run_folder(args, env_name)
    if args.load_best:
        path = run_dir / "best_model.zip"
    elif args.load_checkpoint is not None:
        path = run_dir / f"rl_model_{args.load_checkpoint}_steps.zip"
    elif args.load_last_checkpoint:
        path = last_checkpoint(run_dir)
    else:
        path = run_dir / f"{env_name}.zip"
    if not path.exists():
        available = sorted(p.name for p in run_dir.glob("*.zip"))
        raise ConfigError(f"no model at {path}; models in {run_dir}: {', '.join(available) or 'none'}")
    return path


def run_folder(args: argparse.Namespace, env_name: str) -> Path:
    """--exp-id's run folder: `<f>/<algo>/<env>_<N>` (N = 0: the latest), or `<f>/<algo>` itself for -1."""
    algo_dir = Path(args.folder) / args.algo
    exp_id = latest_run_id(algo_dir, env_name) if args.exp_id == 0 else args.exp_id
    if args.exp_id == 0 and exp_id == 0:
        raise ConfigError(f"no run of {args.algo} on {args.env} in {algo_dir} (looked for {env_name}_<N>)")
    run_dir = algo_dir / f"{env_name}_{exp_id}" if exp_id > 0 else algo_dir
    if not run_dir.is_dir():
        raise ConfigError(f"run folder not found: {run_dir}")
    return run_dir


def last_checkpoint(run_dir: Path) -> Path:
    """--load-last-checkpoint: the newest valid rl_model_*_steps.zip, naming each newer one it skips."""
    found = periodic_checkpoints(run_dir)
    if not found:
        raise ConfigError(f"no rl_model_*_steps.zip checkpoint in {run_dir} (train with --save-freq N)")
    newest = newest_valid_checkpoint(run_dir)
    if newest is None:
        raise CheckpointError(found[-1][1], "no valid checkpoint in the folder: all are torn or corrupt")
    for _, skipped in reversed(found):
        if skipped == newest:
            break
        print(f"Warning: skipping {skipped}: corrupt or incomplete; loading {newest}", file=sys.stderr)
    return newest


def video_path(args: argparse.Namespace, model: Path) -> Path:
    """Where record_video.py writes: -o as a file (.mp4/.gif), or RL Zoo's name in -o (default <run>/videos)."""
    if args.output_folder and args.output_folder.endswith((".mp4", ".gif")):
        return Path(args.output_folder)
    folder = Path(args.output_folder) if args.output_folder else model.parent / "videos"
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"-o/--output-folder: {folder} exists and is not a folder (or name a .mp4 / .gif file)")
    checkpoint = re.fullmatch(r"rl_model_(\d+)_steps\.zip", model.name)
    kind = (
        "best-model"
        if model.name == "best_model.zip"
        else f"checkpoint-{checkpoint[1]}"
        if checkpoint
        else "final-model"
    )
    env_name = env_file_name(args.env)
    return folder / f"{kind}-{args.algo}-{env_name}-step-0-to-step-{args.n_timesteps}.mp4"


def check_reward_log(folder: str) -> None:
    if folder and Path(folder).exists() and not Path(folder).is_dir():
        raise ConfigError(f"--reward-log: {folder} exists and is not a folder")


def saved_env_settings(
    model: Path, env_name: str, manifest: Manifest, trusted: Sequence[str]
) -> tuple[dict[str, Any], tuple[EnvWrapper, ...], str]:
    """(env_kwargs, env_wrappers, the file they come from) from the run's config.yml (read and checked like
    any hyperparameter file), else from the manifest. Both are files read back: wrappers resolve only from
    `trusted` modules."""
    config_file = model.parent / env_name / "config.yml"
    if config_file.is_file():
        where, entry = str(config_file), hyperparams.read_file(config_file)
    else:
        where, entry = str(model), dict(manifest.run.hyperparams)
    entry = normalize_entry(entry, where)
    return (
        literal_mapping(entry.get("env_kwargs"), f"env_kwargs in {where}"),
        entry_env_wrappers(entry, trusted, where),
        where,
    )


@dataclass(frozen=True)
class Loaded:
    """What enjoy.py plays: the model's path and manifest, the env's settings, the policy and ffmpeg."""

    model: Path
    manifest: Manifest
    env_kwargs: dict[str, Any]
    wrappers: tuple[EnvWrapper, ...]
    policy: Policy
    ffmpeg: str


def main(argv: Sequence[str] | None = None, record_video: bool = False) -> int:
    args = build_parser(record_video).parse_args(argv)
    if record_video:
        args.record, args.no_render = "", True  # the file name needs the model: set once it is found
    recording = args.record is not None
    headless = not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY")
    # --record renders offscreen (rgb_array) even with --no-render, which only means "no window".
    render = "rgb_array" if recording else (None if args.no_render or headless else "human")
    try:
        env_id, stand_in = (args.env, "") if render is None else rendered_env_id(args.env)
        loaded = load(args, record_video, headless, env_id)
    except STOPPING_ERRORS as error:
        return exit_code(error)
    manifest = loaded.manifest
    if env_id != args.env:
        print(f"{args.env} draws no frames here: playing gymnasium's {env_id}, {stand_in}", file=sys.stderr)
    try:  # the first env renders, and the first can refuse to (a JAX-native env that draws no frames)
        envs = [
            make_single_env(
                env_id, loaded.env_kwargs, loaded.wrappers, args.gym_packages, render_mode=render if i == 0 else None
            )
            for i in range(args.n_envs)
        ]
    except ConfigError as error:
        return exit_code(error)
    try:
        if args.verbose:
            print(f"Loaded {loaded.model} ({manifest.run.algo}, {manifest.counters.env_steps} env steps)")
        returns = run_episodes(envs, loaded.policy, args, loaded.ffmpeg)
    finally:
        for env in envs:
            env.close()
    if args.verbose and returns:
        print(f"{len(returns)} Episodes\nMean reward: {np.mean(returns):.2f} +/- {np.std(returns):.2f}")
    return 0


def check_args(args: argparse.Namespace, headless: bool) -> str:
    """The flags checked, the process prepared (device, cache, packages, headless rendering); ffmpeg's path
    when recording."""
    recording = args.record is not None
    if args.n_timesteps < 1 or args.n_envs < 1:
        raise ConfigError(f"-n and --n-envs must be positive, got {args.n_timesteps} and {args.n_envs}")
    if args.record and not args.record.endswith((".mp4", ".gif")):
        raise ConfigError(f"--record: expected a .mp4 (or .gif) path, got {args.record!r}")
    check_reward_log(args.reward_log)
    ffmpeg = find_ffmpeg() if recording else ""
    if args.custom_objects:
        print(
            "--custom-objects: not needed (a checkpoint holds arrays and a manifest, nothing pickled)", file=sys.stderr
        )
    if headless and recording:
        os.environ.setdefault("MUJOCO_GL", "egl")  # before gymnasium imports mujoco's renderer
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame (classic control): no display to open
    # enjoy.py acts with a small call at every env step: on the calling thread (rlbench.run.device)
    select_device("cpu" if args.device == "auto" else args.device, args.num_threads, inline_cpu_calls=True)
    compile_cache.enable(args.compile_cache)
    for module in args.gym_packages:
        __import__(module)
    check_env_id(args.env)
    return ffmpeg


def load(args: argparse.Namespace, record_video: bool, headless: bool, env_id: str) -> Loaded:
    """The model, its env's settings and its policy; ConfigError (exit 2) or CheckpointError (exit 1) first.
    `env_id` is the env played: args.env's, or gymnasium's in place of an EnvPool id when rendering."""
    ffmpeg = check_args(args, headless)
    model = find_model(args)
    if record_video:
        args.record = str(video_path(args, model))
    checkpoint = read_checkpoint(model, load_replay_buffer=False, expect=policy_expectations)
    manifest = checkpoint.manifest
    if manifest.run.algo != args.algo:
        raise ConfigError(f"{model} was trained with --algo {manifest.run.algo}, not {args.algo}")
    env_kwargs, wrappers, where = saved_env_settings(
        model, env_file_name(args.env), manifest, trusted_modules([*args.gym_packages, *args.trust_wrappers])
    )
    if args.env_kwargs is not None:
        env_kwargs |= parse_key_values(args.env_kwargs, "--env-kwargs")
    # As train.py: one env built, reset and stepped with these kwargs, so what the env rejects is one line now.
    flag = f"--env-kwargs / env_kwargs in {where}" if args.env_kwargs is not None else f"env_kwargs in {where}"
    check_env_runs(env_id, env_kwargs, wrappers, args.gym_packages, flag)
    from rlbench.run.policy import load_policy

    policy = load_policy(checkpoint, seed=args.seed)
    if args.norm_reward and policy.stats is None:
        print(f"--norm-reward: {model} was trained without normalize; rewards are the env's", file=sys.stderr)
    return Loaded(model, manifest, env_kwargs, wrappers, policy, ffmpeg)


def finished_episode(
    info: dict[str, Any], reports: bool, shown_return: float, env_return: float, length: int
) -> tuple[float, float, int] | None:
    """(the return shown, the env's own return, the length) of an episode that ended; for an env that reports its
    own episodes (Atari: games, at their raw score and length in frames) the one it reports, None after a life."""
    if not reports:
        return float(shown_return), float(env_return), int(length)
    if "episode" not in info:
        return None
    game = info["episode"]
    return float(game["r"]), float(game["r"]), int(game["l"])


def record_episode(
    env_index: int, episode: tuple[float, float, int], count: int, monitors: MonitorFiles | None, verbose: int
) -> None:
    shown, env_return, length = episode
    if monitors is not None:
        monitors.episode(env_index, env_return, length)
    if verbose:
        print(f"Episode {count} (env {env_index}): return {shown:.2f}, length {length}")


def run_episodes(envs: list[gym.Env], policy: Policy, args: argparse.Namespace, ffmpeg: str) -> list[float]:
    """Step every env `n_timesteps` times (each resets when its episode ends); print each episode, and
    record the first env's frames (`args.record`) and each env's episodes (`args.reward_log`)."""
    from rich.progress import track

    finished: list[float] = []
    with contextlib.ExitStack() as cleanup:
        video = None
        if args.record:
            video = cleanup.enter_context(
                VideoWriter(Path(args.record), envs[0].metadata.get("render_fps", 30), ffmpeg)
            )
        monitors = None
        if args.reward_log:
            Path(args.reward_log).mkdir(parents=True, exist_ok=True)
            monitors = MonitorFiles(Path(args.reward_log), len(envs), args.env)
            cleanup.callback(monitors.close)
        obs = np.stack([env.reset(seed=args.seed + i)[0] for i, env in enumerate(envs)])
        reports = env_reports_episodes(envs[0])  # episodes are the env's own (Atari's games), not the agent's
        episode_return, episode_length = np.zeros(len(envs)), np.zeros(len(envs), int)
        env_return = np.zeros(len(envs))  # the env's own rewards, for the Monitor files, whatever is shown
        stats = policy.stats if args.norm_reward else None  # --norm-reward with the model's statistics
        for _ in track(range(args.n_timesteps), description="enjoy", disable=not args.progress):
            if video is not None:
                # the state the action is chosen in; render_mode rgb_array: a frame
                video.append(cast(np.ndarray, envs[0].render()))
            actions = policy(obs, deterministic=not args.stochastic)
            for i, env in enumerate(envs):
                obs[i], reward, terminated, truncated, info = env.step(actions[i])
                episode_return[i] += stats.scale_reward(float(reward)) if stats is not None else reward
                env_return[i] += reward
                episode_length[i] += 1
                if terminated or truncated:
                    episode = finished_episode(info, reports, episode_return[i], env_return[i], episode_length[i])
                    if episode is not None:
                        finished.append(episode[0])
                        record_episode(i, episode, len(finished), monitors, args.verbose)
                    episode_return[i], env_return[i], episode_length[i] = 0.0, 0.0, 0
                    obs[i] = env.reset()[0]
    if video is not None and args.verbose:
        print(f"Recorded {video.frames} frames to {args.record}")
    return finished
