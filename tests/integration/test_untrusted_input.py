"""Field test (issue 20): files read back cannot run code, settings must be finite and in range, bad input
is one line and exit 2 before any folder exists, credentials are never written, and a full or read-only
disk is reported naming the file (RELIABILITY A4, A5, A8, A10, B9, C3, H1)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import main as train
from rlbench.config.algorithms.sac import build_config as build_sac_config
from rlbench.envs.wrappers import parse_env_wrappers, trusted_modules
from rlbench.errors import ConfigError
from tests.conftest import REPO_ROOT

TINY = [
    "-n",
    "300",
    "--eval-freq",
    "150",
    "--eval-episodes",
    "1",
    "--verbose",
    "0",
    "--seed",
    "3",
    "-params",
    "learning_starts:100",
    "batch_size:8",
    "buffer_size:1000",
    "policy_kwargs:dict(net_arch=[16])",
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny SAC run on Pendulum: its run folder (config.yml, the final model) is what the tests forge."""
    logs = tmp_path_factory.mktemp("trained") / "logs"
    assert train(["--algo", "sac", "--env", "Pendulum-v1", "-f", str(logs), *TINY]) == 0
    return logs


@pytest.fixture
def marker_dir(tmp_path, monkeypatch):
    folder = tmp_path / "markers"
    folder.mkdir()
    monkeypatch.setenv("RLBENCH_TEST_MARKER_DIR", str(folder))
    sys.modules.pop("tests.marker_wrappers", None)  # so that an import would mark again
    return folder


def copy_run(trained: Path, tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    shutil.copytree(trained, logs)
    return logs


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def run_script(script: str, *argv: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, str(Path(REPO_ROOT) / script), *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- 1. files read back name no code ------------------------------------------------------------------


def test_config_yml_naming_http_server_is_refused_by_enjoy_and_no_port_opens(trained, tmp_path):
    logs = copy_run(trained, tmp_path)
    port = free_port()
    config = logs / "sac" / "Pendulum-v1_1" / "Pendulum-v1" / "config.yml"
    entry = yaml.safe_load(config.read_text())
    entry["env_wrapper"] = [{"http.server.test": {"port": port, "bind": "127.0.0.1"}}]
    config.write_text(yaml.safe_dump(entry))
    # A subprocess: if the server ever started, it would serve forever (the timeout would fail the test).
    result = run_script(
        "enjoy.py",
        "--algo",
        "sac",
        "--env",
        "Pendulum-v1",
        "-f",
        str(logs),
        "-n",
        "5",
        "--no-render",
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "module 'http.server' is not trusted" in result.stderr and "--trust-wrappers" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not port_open(port)


def forge_manifest(model: Path, forged: Path, change) -> None:
    """A copy of the checkpoint whose manifest.json is edited by `change(manifest)` (the manifest holds the
    other members' checksums, not its own, so an edited one still verifies)."""
    with zipfile.ZipFile(model) as source, zipfile.ZipFile(forged, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "manifest.json":
                manifest = json.loads(data)
                change(manifest)
                data = json.dumps(manifest).encode()
            target.writestr(item, data)


def test_manifest_naming_http_server_is_refused_by_train_resume_before_any_folder(trained, tmp_path):
    port = free_port()
    forged = tmp_path / "forged.zip"
    forge_manifest(
        trained / "sac" / "Pendulum-v1_1" / "Pendulum-v1.zip",
        forged,
        lambda m: m["hyperparams"].update(env_wrapper=[{"http.server.test": {"port": port}}]),
    )
    result = run_script(
        "train.py",
        "--algo",
        "sac",
        "--env",
        "Pendulum-v1",
        "-i",
        str(forged),
        "-f",
        str(tmp_path / "logs"),
        "-n",
        "10",
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "module 'http.server' is not trusted" in result.stderr
    assert not (tmp_path / "logs").exists() and not port_open(port)


@pytest.mark.parametrize(
    "entry,message",
    [
        ("os.system", "module 'os' is not trusted"),
        ("this.Zen", "module 'this' is not trusted"),  # `import this` prints: it must not even be imported
        ("tests.marker_wrappers.touch_marker", "module 'tests.marker_wrappers' is not trusted"),
        ("gymnasium.wrappers.vector.RecordEpisodeStatistics", "not a gymnasium.Wrapper subclass"),
        ("gymnasium.wrappersx.TimeLimit", "module 'gymnasium.wrappersx' is not trusted"),
        ("__import__('os').system", "not a dotted class name"),
    ],
)
def test_untrusted_or_non_wrapper_names_are_refused_without_importing(marker_dir, capsys, entry, message):
    with pytest.raises(ConfigError, match="env_wrapper.*" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_env_wrappers([entry], trusted_modules())
    out = capsys.readouterr().out
    assert "The Zen of Python" not in out
    assert not any(marker_dir.iterdir())  # tests.marker_wrappers was neither imported nor called


def test_a_trusted_module_still_needs_a_wrapper_class_and_literal_kwargs(marker_dir):
    trusted = trusted_modules(["tests.marker_wrappers"])
    with pytest.raises(ConfigError, match=r"touch_marker.*not a gymnasium\.Wrapper subclass"):
        parse_env_wrappers(["tests.marker_wrappers.touch_marker"], trusted)
    assert not (marker_dir / "called").exists()
    import datetime

    with pytest.raises(ConfigError, match="scale must be a literal"):
        parse_env_wrappers([{"tests.marker_wrappers.ScaleReward": {"scale": datetime.date(2020, 1, 1)}}], trusted)
    (wrapper,) = parse_env_wrappers([{"tests.marker_wrappers.ScaleReward": {"scale": 2.0}}], trusted)
    assert wrapper.to_entry() == {"tests.marker_wrappers.ScaleReward": {"scale": 2.0}}


def test_trust_wrappers_lets_a_users_own_wrapper_train_and_replay(tmp_path, capsys):
    conf = tmp_path / "conf.yml"
    conf.write_text(
        "Pendulum-v1:\n  n_timesteps: 300\n  env_wrapper: [{tests.marker_wrappers.ScaleReward: {scale: 0.5}}]\n"
    )
    logs = tmp_path / "logs"
    argv = ["--env", "Pendulum-v1", "-conf", str(conf), "-f", str(logs), *TINY[2:]]
    assert train(argv) == 2
    assert "--trust-wrappers tests" in capsys.readouterr().err and not logs.exists()
    assert train([*argv, "--trust-wrappers", "tests.marker_wrappers"]) == 0
    config = yaml.safe_load(next(logs.rglob("config.yml")).read_text())
    assert config["env_wrapper"] == [{"tests.marker_wrappers.ScaleReward": {"scale": 0.5}}]
    enjoy_argv = ["--algo", "sac", "--env", "Pendulum-v1", "-f", str(logs), "-n", "5", "--no-render"]
    assert enjoy(enjoy_argv) == 2  # the run's config.yml is read back: the module must be named again
    assert enjoy([*enjoy_argv, "--trust-wrappers", "tests.marker_wrappers"]) == 0


# -- 2. credentials are masked wherever they are stored -------------------------------------------


def test_storage_password_is_masked_in_run_files_and_wandb_config(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    logs = tmp_path / "logs"
    assert (
        train(
            [
                "--env",
                "Pendulum-v1",
                "-f",
                str(logs),
                *TINY,
                "--track",
                "--storage",
                "postgresql://user:S3CRETPW@127.0.0.1:1/optuna",
            ]
        )
        == 0
    )
    params = next(logs.rglob("args.yml")).parent
    assert yaml.safe_load((params / "args.yml").read_text())["storage"] == "postgresql://user:***@127.0.0.1:1/optuna"
    assert "--storage 'postgresql://user:***@127.0.0.1:1/optuna'" in (params / "command.txt").read_text()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.suffix == ".wandb" for p in written)
    assert not [p for p in written if b"S3CRETPW" in p.read_bytes()]


# -- 8. non-finite and out-of-type settings ------------------------------------------------------


@pytest.mark.parametrize(
    "params,message",
    [
        (["learning_rate:1e400"], r"learning_rate: expected a finite number > 0, got inf"),
        (["learning_rate:lin_1e400"], r"learning_rate: expected a finite number > 0"),
        (["ent_coef:auto_1e400"], r"ent_coef: expected 'auto', 'auto_<positive finite float>'"),
        (["qf_learning_rate:1e400"], r"qf_learning_rate: expected a finite number, got inf \(too large"),
        (["buffer_size:1e400"], r"buffer_size: expected a finite number, got inf"),
        (["n_envs:1e400"], r"n_envs: inf is too large"),
        (["n_timesteps:1e400"], r"n_timesteps \(-n\): inf is too large"),
        (["batch_size:100000000000000000000000000000000000"], r"batch_size: .* is too large"),
        (["policy_kwargs:{1: 2}"], r"policy_kwargs: 1 is not a valid keyword argument name"),
        (["env_kwargs:[1,2]"], r"env_kwargs \(from -params\): expected a dict of keyword arguments"),
        (
            ["use_sde:True", "policy_kwargs:dict(log_std_init=1e400)"],
            r"log_std_init: expected a finite number, got inf",
        ),
        (
            ["use_sde:True", "sde_sample_freq:-5"],
            r"sde_sample_freq: expected -1 .* or a positive number of steps, got -5",
        ),
    ],
)
def test_non_finite_and_malformed_params_exit_2_before_writing(tmp_path, capsys, params, message):
    steps = [] if params[0].startswith("n_timesteps") else ["-n", "100"]  # -n would win over -params
    assert train(["--env", "Pendulum-v1", "-f", str(tmp_path / "logs"), *steps, "-params", *params]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and __import__("re").search(message, err), err
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("key", ["learning_rate", "tau", "gamma"])
def test_nan_from_a_yaml_file_is_refused(tmp_path, capsys, key):
    conf = tmp_path / "nan.yml"
    conf.write_text(f"Pendulum-v1:\n  n_timesteps: 100\n  {key}: .nan\n")
    assert train(["--env", "Pendulum-v1", "-conf", str(conf), "-f", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert f"{key}: expected a finite number" in err and "nan" in err
    assert not (tmp_path / "logs").exists()


def test_nan_in_a_resumed_manifest_is_refused(trained, tmp_path, capsys):
    forged = tmp_path / "nan.zip"
    forge_manifest(
        trained / "sac" / "Pendulum-v1_1" / "Pendulum-v1.zip",
        forged,
        lambda m: m["hyperparams"].update(gamma=float("nan")),
    )
    assert train(["--env", "Pendulum-v1", "-i", str(forged), "-f", str(tmp_path / "logs"), "-n", "10"]) == 2
    assert "gamma: expected a finite number, got nan" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()


def test_every_float_setting_checks_finiteness():
    for key in ("tau", "gamma", "target_entropy", "qf_learning_rate"):
        with pytest.raises(ConfigError, match=f"{key}: expected a finite number"):
            build_sac_config({key: float("nan")}, 1, "test")
    for key in ("dropout_rate",):
        with pytest.raises(ConfigError, match=f"{key}: expected a finite number"):
            build_sac_config({"policy_kwargs": {key: float("nan")}}, 1, "test")


# -- 10. one line, exit 2, no folder --------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["--env-kwargs", "nonexistent_kw:1"],
            r"--env-kwargs / env_kwargs: Pendulum-v1 fails with "
            r"nonexistent_kw=1: TypeError",
        ),
        (["--env-kwargs", "g:'abc'"], r"--env-kwargs / env_kwargs: Pendulum-v1 fails with g='abc': TypeError"),
        (["--eval-env-kwargs", "g:'abc'"], r"--eval-env-kwargs: Pendulum-v1 fails with g='abc': TypeError"),
        (["--seed", "99999999999999999999"], r"--seed 99999999999999999999 is too large"),
        (["--seed", str(2**64)], r"is too large: seeds are in \[0, 2\*\*32-1\]"),
        (["-params", "batch_size:100000000"], r"the learner needs about .* GiB .* lower batch_size"),
        (["-params", "policy_kwargs:dict(net_arch=[100000000,100000000])"], r"the learner needs about .*net_arch"),
    ],
)
def test_bad_env_kwargs_seeds_and_oversized_learners_exit_2_before_writing(tmp_path, capsys, argv, message):
    assert train(["--env", "Pendulum-v1", "-f", str(tmp_path / "logs"), "-n", "100", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and __import__("re").search(message, err), err
    assert not (tmp_path / "logs").exists()


def test_log_folder_that_is_a_file_exits_2(tmp_path, capsys):
    file = tmp_path / "a_file"
    file.write_text("")
    assert train(["--env", "Pendulum-v1", "-f", str(file / "logs"), "-n", "100"]) == 2
    assert f"-f/--log-folder {file / 'logs'}: {file} is a file, not a folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    "source,message",
    [
        ("hyperparams = {\n  'Pendulum-v1': (1,\n", r"bad.py:2: syntax error in the hyperparameter file"),
        ("x = 1\nraise RuntimeError('boom')\n", r"bad.py:2: the hyperparameter file raised RuntimeError: boom"),
    ],
)
def test_python_config_errors_name_the_file_and_line(tmp_path, capsys, source, message):
    conf = tmp_path / "bad.py"
    conf.write_text(source)
    assert train(["--env", "Pendulum-v1", "-conf", str(conf), "-f", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and __import__("re").search(message, err), err


# -- 11. wording ----------------------------------------------------------------------------------


def test_large_integers_are_too_large_and_where_names_only_what_was_given(tmp_path, capsys):
    conf = tmp_path / "big.yml"
    conf.write_text(f"Pendulum-v1:\n  n_timesteps: 100\n  buffer_size: {10**35}\n")
    assert train(["--env", "Pendulum-v1", "-conf", str(conf), "-f", str(tmp_path / "logs")]) == 2
    assert "buffer_size: 100000000000000000000000000000000000 is too large" in capsys.readouterr().err
    conf.write_text("Pendulum-v1:\n  n_timesteps: 100\n  learning_rat: 0.1\n")
    assert train(["--env", "Pendulum-v1", "-conf", str(conf), "-f", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert f"in {conf};" in err and "-params" not in err.split("(valid")[0]


# -- 7. a full or read-only disk ------------------------------------------------------------------


def in_tmpfs(tmp_path: Path, options: str, fill_bytes: int, *argv: str) -> subprocess.CompletedProcess:
    """train.py with `-f` on a tmpfs of its own (a user and mount namespace: no root, nothing outside it
    changes), optionally filled to the last byte first."""
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux's unshare")
    mount = tmp_path / "mnt"
    mount.mkdir()
    fill = f"head -c {fill_bytes} /dev/zero > {mount}/fill 2>/dev/null; " if fill_bytes else ""
    script = (
        f"mount -t tmpfs -o {options} tmpfs {mount} || exit 99; {fill}"
        f"exec {sys.executable} {REPO_ROOT}/train.py -f {mount}/logs " + " ".join(map(repr, argv))
    )
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "JAX_PLATFORMS": "cpu"}
    result = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    if result.returncode == 99 and not os.environ.get("CI"):
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {result.stderr.strip()}")
    return result


def test_full_disk_at_start_names_the_file_and_leaves_no_empty_file(tmp_path):
    result = in_tmpfs(tmp_path, "size=64k", 64 * 1024, "--env", "Pendulum-v1", *TINY)
    assert result.returncode == 1, result.stderr
    assert "could not write" in result.stderr and "config.yml: No space left on device" in result.stderr
    assert result.stderr.count("could not write") == 1, result.stderr  # said once (issue 44 item 8)
    assert "Traceback" not in result.stderr


def test_full_disk_at_a_checkpoint_says_so_once_and_leaves_no_partial_file(tmp_path):
    """Issue 44 item 8: the message repeated itself ("could not write checkpoint X: could not write X: ...")."""
    wide = [*TINY[:-1], "policy_kwargs:dict(net_arch=[256, 256])"]  # a final model (~5 MB) the 1 MB disk cannot hold
    result = in_tmpfs(tmp_path, "size=1m", 0, "--env", "Pendulum-v1", *wide, "--eval-freq", "-1")
    assert result.returncode == 1, result.stderr
    model = tmp_path / "mnt" / "logs" / "sac" / "Pendulum-v1_1" / "Pendulum-v1.zip"
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: could not write checkpoint {model}: No space left on device"], result.stderr
    assert "Traceback" not in result.stderr


def test_read_only_log_folder_exits_2(tmp_path):
    result = in_tmpfs(tmp_path, "ro,size=64k", 0, "--env", "Pendulum-v1", *TINY)
    assert result.returncode == 2, result.stderr
    assert "cannot create folders in" in result.stderr and "read-only" in result.stderr


# -- 18. RL Zoo's tuned CrossQ entries ship unchanged ---------------------------------------------


def test_crossq_pendulum_entry_is_rl_zoos():
    entry = yaml.safe_load((Path(REPO_ROOT) / "hyperparams" / "crossq.yml").read_text())["Pendulum-v1"]
    assert entry["policy_delay"] == 2 and entry["policy_kwargs"] == "dict(net_arch=[256, 256])"


def test_enjoy_names_a_missing_manifest_key_instead_of_a_traceback(trained, tmp_path, capsys):
    logs = copy_run(trained, tmp_path)
    model = logs / "sac" / "Pendulum-v1_1" / "Pendulum-v1.zip"
    forged = tmp_path / "forged.zip"
    forge_manifest(model, forged, lambda m: m.pop("hyperparams"))
    forged.replace(model)
    assert enjoy(["--algo", "sac", "--env", "Pendulum-v1", "-f", str(logs), "-n", "5", "--no-render"]) == 1
    err = capsys.readouterr().err
    assert "the manifest has no hyperparams" in err and err.count("\n") == 1


# -- issue 32 item 12: hyperparameter files nested, oversized or alias-bombed; env ids --------------------

LAUGHS = "a: &a [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n" + "".join(
    f"{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)  # 640 bytes; i expands to 10**9 zeros


@pytest.mark.parametrize(
    "text,message",
    [
        ("[" * 5000 + "]" * 5000, "nested too deeply to parse"),
        ("Pendulum-v1: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", "nested"),
        ("Pendulum-v1: {n_timesteps: 100}\n" + "#" * (1 << 20), "larger than 1048576 bytes"),
        *(
            (LAUGHS + f"Pendulum-v1: {{n_timesteps: 100, {entry}}}\n", "holds more than 200000 values")
            for entry in ("gamma: *i", "env_kwargs: {g: *i}", "policy_kwargs: {net_arch: *i}", "env_wrapper: *i")
        ),
    ],
    ids=[
        "nested lists",
        "nested maps",
        "over 1 MiB",
        "laughs gamma",
        "laughs env_kwargs",
        "laughs net_arch",
        "laughs env_wrapper",
    ],
)
def test_hyperparameter_file_nested_oversized_or_alias_bombed_is_one_line(tmp_path, capsys, text, message):
    """RecursionError tracebacks, minutes of parsing, or memory exhausted by printing or walking the aliases."""
    conf = tmp_path / "bomb.yml"
    conf.write_text(text)
    assert train(["--env", "Pendulum-v1", "-conf", str(conf), "-f", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot read hyperparameters from {conf}: ") and message in err, err
    assert err.count("\n") == 1
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("env_id", ["..:Pendulum-v1", ":Pendulum-v1", ".os:Pendulum-v1"])
def test_env_id_with_a_malformed_module_is_one_line(tmp_path, capsys, env_id):
    """importlib's TypeError (a relative name) and ValueError (an empty one) were tracebacks."""
    assert train(["--env", env_id, "-f", str(tmp_path / "logs"), "-n", "100"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: environment {env_id!r}: {env_id.partition(':')[0]!r} is not a module name; expected "
        "module:EnvName-v0 with an importable module (e.g. my_package.envs:MyEnv-v0), or a registered id\n"
    )
    assert not (tmp_path / "logs").exists()


def test_namespaced_env_id_gets_one_run_folder_as_rl_zoo_names_it(tmp_path, capsys):
    """phys2d/Pendulum-v0 passed the env probe, then its run folder (sac/phys2d/...) failed, blaming -f."""
    logs = tmp_path / "logs"
    argv = ["--env", "phys2d/Pendulum-v0", "-f", str(logs), *TINY[:2], "--eval-freq", "-1", *TINY[6:]]
    assert train(argv) == 0, capsys.readouterr().err
    run_dir = logs / "sac" / "phys2d-Pendulum-v0_1"
    assert (run_dir / "phys2d-Pendulum-v0.zip").is_file()
    assert (run_dir / "phys2d-Pendulum-v0" / "config.yml").is_file()
    capsys.readouterr()
    assert enjoy(["--env", "phys2d/Pendulum-v0", "-f", str(logs), "-n", "5", "--no-render"]) == 0
    assert f"Loaded {run_dir / 'phys2d-Pendulum-v0.zip'}" in capsys.readouterr().out


def test_a_file_of_many_entries_without_the_env_lists_only_some(tmp_path, capsys):
    """Item 12: the keys of a file without the env's entry were all printed on the error line."""
    conf = tmp_path / "many.yml"
    conf.write_text("".join(f"Env{index:05d}-v0: {{n_timesteps: 1}}\n" for index in range(20_000)))
    assert train(["--env", "Pendulum-v1", "-conf", str(conf), "-f", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: no hyperparameters for Pendulum-v1 in {conf}, and no 'default' entry; keys: Env00000-v0"
    )
    assert err.endswith("Env00099-v0 and 19900 more\n") and len(err) < 2000, err[-200:]
