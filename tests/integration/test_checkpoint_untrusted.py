"""A checkpoint given to `-i` is untrusted input (B5, B9; issue 20 items 3, 10, 11): a forged archive is
refused with `corrupt or incomplete checkpoint: <path> (<reason>)` and exit 1 before any run folder
exists, and a small file never makes the reader allocate more than the configuration needs."""

import hashlib
import io
import json
import re
import struct
import subprocess
import sys
import zipfile
import zlib

import numpy as np
import pytest

from rlbench.cli.train import main
from tests.conftest import REPO_ROOT

TINY = [
    "--algo",
    "sac",
    "--env",
    "Pendulum-v1",
    "--seed",
    "3",
    "--verbose",
    "0",
    "--eval-freq",
    "-1",
    "-params",
    "learning_starts:100",
    "batch_size:8",
    "buffer_size:1000",
    "policy_kwargs:dict(net_arch=[16])",
]
ROW_WIDTH = 9  # Pendulum: 2 * 3 observations + 1 action + reward + terminated


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A real 300-step checkpoint with its replay buffer (300 rows of buffer_size 1000)."""
    folder = tmp_path_factory.mktemp("trained")
    assert main(["-f", str(folder), *TINY, "-n", "300", "--save-replay-buffer"]) == 0
    return folder / "sac" / "Pendulum-v1_1" / "Pendulum-v1.zip"


def members_of(path):
    with zipfile.ZipFile(path) as archive:
        return {info.filename: (archive.read(info), info.compress_type) for info in archive.infolist()}


def forge(model, target, replace=(), edit=None):
    """Copy `model` with members replaced ({name: bytes}, None deletes) and the manifest's checksums and
    sizes made to match, as a careful forger would; `edit(manifest)` then changes anything else."""
    members = members_of(model)
    manifest = json.loads(members.pop("manifest.json")[0])
    for name, data in dict(replace).items():
        if data is None:
            members.pop(name)
        else:
            members[name] = (data, members.get(name, (b"", zipfile.ZIP_STORED))[1])
    manifest["members"] = {name: hashlib.sha256(data).hexdigest() for name, (data, _) in members.items()}
    manifest["sizes"] = {name: len(data) for name, (data, _) in members.items()}
    if edit is not None:
        edit(manifest)
    with zipfile.ZipFile(target, "w") as archive:
        for name, (data, compression) in members.items():
            archive.writestr(name, data, compress_type=compression)
        archive.writestr("manifest.json", json.dumps(manifest))
    return target


def npy(array):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=array.dtype.hasobject)  # a pickle: forged on purpose
    return buffer.getvalue()


def resume(tmp_path, checkpoint, *argv):
    return main(["-f", str(tmp_path / "logs"), *TINY, "-i", str(checkpoint), *argv])


def assert_refused(tmp_path, capsys, checkpoint, reason, *argv, code=1):
    assert resume(tmp_path, checkpoint, *argv) == code
    err = capsys.readouterr().err
    assert f"error: corrupt or incomplete checkpoint: {checkpoint} ({reason}" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "logs").exists()


# -- item 3: a small file must not force a large allocation ------------------------------------------

BOMB_ROWS = 2**31 // (4 * ROW_WIDTH)  # a float32 [n, 9] array of 2 GiB


def zeros_deflated(total: int, chunk: int = 1 << 24) -> bytes:
    """A raw deflate stream of `total` zero bytes (a few MB), built from one compressed chunk: after a full
    flush, every chunk compresses to the same bytes."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(bytes(chunk)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return block * (total // chunk) + compressor.compress(bytes(total % chunk)) + compressor.flush()


def write_zip(path, entries):
    """A zip archive from (name, raw stored or deflated bytes, method, crc, declared size): zipfile cannot
    write a member whose header says other than its data."""
    body, directory = bytearray(), bytearray()
    for name, raw, method, crc, size in entries:
        encoded, offset = name.encode(), len(body)
        body += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(raw), size, len(encoded), 0)
        body += encoded + raw
        directory += (
            struct.pack(
                "<4s6H3L5H2L",
                b"PK\x01\x02",
                20,
                20,
                0,
                method,
                0,
                0,
                crc,
                len(raw),
                size,
                len(encoded),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + encoded
        )
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(directory), len(body), 0)
    path.write_bytes(bytes(body + directory + end))


def npy_header(rows: int) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f4", "fortran_order": False, "shape": (rows, ROW_WIDTH)})
    return buffer.getvalue()


def bomb(model, target, variant):
    """`model` with replay_buffer/rows.npy replaced by a .npy header and 2 GiB of zeros, deflated to a few
    MB. The header and the zip header declare 2 GiB, or (last variant) the real 300 rows while the
    stream goes on for 2 GiB."""
    understated = variant == "zip header understates it"
    header = npy_header(300 if understated else BOMB_ROWS)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH) + zeros_deflated(BOMB_ROWS * ROW_WIDTH * 4)
    if variant == "beyond deflate's ratio":
        raw = raw[: 2**20]  # 1 MiB cannot inflate to 2 GiB
    declared = len(header) + (300 if understated else BOMB_ROWS) * ROW_WIDTH * 4
    members = members_of(model)
    manifest = json.loads(members.pop("manifest.json")[0])
    if variant in ("manifest lists the 2 GiB", "beyond deflate's ratio"):  # the checksum needs the inflated bytes
        manifest.setdefault("sizes", {})["replay_buffer/rows.npy"] = declared
    entries = [
        (name, data, zipfile.ZIP_STORED, zlib.crc32(data), len(data))
        for name, (data, _) in members.items()
        if name != "replay_buffer/rows.npy"
    ]
    entries.append(("replay_buffer/rows.npy", raw, zipfile.ZIP_DEFLATED, 0, declared))
    encoded = json.dumps(manifest).encode()
    entries.append(("manifest.json", encoded, zipfile.ZIP_STORED, zlib.crc32(encoded), len(encoded)))
    write_zip(target, entries)
    return target


MEASURE = """
import resource, sys, time
from rlbench.cli.train import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.monotonic()
code = main(sys.argv[1:])
print("measured", code, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024,
      time.monotonic() - start)
"""


@pytest.mark.parametrize(
    "variant,reason",
    [
        ("manifest unchanged", r"replay_buffer/rows.npy declares \d+ bytes, the manifest lists 10928"),
        ("manifest lists the 2 GiB", rf"replay_buffer/rows.npy has shape \[{BOMB_ROWS}, 9\], expected \[<=1000, 9\]"),
        ("zip header understates it", "not a zip archive or truncated: Bad CRC-32 for file 'replay_buffer/rows.npy'"),
        (
            "beyond deflate's ratio",
            r"replay_buffer/rows.npy declares \d+ bytes from 1048576 compressed bytes, more than "
            "deflate can produce",
        ),
    ],
)
def test_member_inflating_to_2_gib_is_refused_before_it_is_decompressed(tmp_path, model, variant, reason):
    """A 2 GiB member in a file of a few MB: refused quickly, peak RSS well under the 2 GiB."""
    forged = bomb(model, tmp_path / "bomb.zip", variant)
    assert forged.stat().st_size < 8 * 2**20
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, "-f", str(tmp_path / "logs"), *TINY, "-i", str(forged)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("measured")]
    _, code, peak_mib, seconds = line.split()
    assert int(peak_mib) < 300, f"peak RSS grew by {peak_mib} MiB"
    assert float(seconds) < 30
    assert int(code) == 1, proc.stderr
    assert re.search(
        rf"^error: corrupt or incomplete checkpoint: {re.escape(str(forged))} \({reason}", proc.stderr, re.MULTILINE
    ), proc.stderr
    assert not (tmp_path / "logs").exists()


# -- items 10 and 11: forged members and manifests, one line each, before any folder ------------------


def test_unlisted_member_is_named(tmp_path, capsys, model):
    forged = tmp_path / "extra.zip"
    forged.write_bytes(model.read_bytes())
    with zipfile.ZipFile(forged, "a") as archive:
        archive.writestr("host/extra.npy", npy(np.zeros(3)))
    assert_refused(tmp_path, capsys, forged, "unexpected member host/extra.npy not listed in the manifest")


@pytest.mark.parametrize(
    "name,data,reason",
    [
        ("notes.txt", b"hello", "unexpected member notes.txt: not part of an rlbench checkpoint"),
        ("host/extra.npy", b"", "unexpected member host/extra.npy: not part of an rlbench checkpoint"),
        ("host/next_action.npy", b"", "host/next_action.npy is not a .npy array (EOF: reading magic string"),
        (
            "host/obs.npy",
            npy(np.zeros((1, 3), object)),
            "host/obs.npy holds dtype object; checkpoints hold only numeric",
        ),
        ("host/obs.npy", npy(np.zeros((1, 3), "S9")), "host/obs.npy holds dtype |S9; checkpoints hold only numeric"),
        ("host/obs.npy", npy(np.zeros((1, 4), np.float32)), "host/obs.npy has shape [1, 4], expected [1, 3]"),
        ("host/obs.npy", None, "member host/obs.npy is missing"),
        # Issue 32: a KeyError traceback when the resume replayed the episode its manifest says began.
        ("host/episode_actions_0.npy", None, "member host/episode_actions_0.npy is missing"),
        (
            "host/episode_actions_0.npy",
            npy(np.zeros((301, 1), np.float32)),
            "host/episode_actions_0.npy has shape [301, 1], expected [<=300, 1]",
        ),
    ],
)
def test_forged_member_listed_in_the_manifest_is_refused_by_name(tmp_path, capsys, model, name, data, reason):
    """The manifest's checksums and sizes match the forged members: the archive's own checks pass."""
    forged = forge(model, tmp_path / "forged.zip", {name: data})
    assert_refused(tmp_path, capsys, forged, reason)


@pytest.mark.parametrize(
    "rows,reason",
    [
        (
            np.zeros((300, ROW_WIDTH + 1), np.float32),
            "replay_buffer/rows.npy has shape [300, 10], expected [<=1000, 9]",
        ),
        (np.zeros((1200, ROW_WIDTH), np.float32), "replay_buffer/rows.npy has shape [1200, 9], expected [<=1000, 9]"),
        (np.zeros((300, ROW_WIDTH), np.float64), "replay_buffer/rows.npy holds float64, expected float32"),
    ],
)
def test_replay_buffer_of_the_wrong_shape_is_refused_before_the_run_folder(tmp_path, capsys, model, rows, reason):
    """Item 10: today exit 2 with a raw numpy message after the folder exists."""
    forged = forge(model, tmp_path / "rows.zip", {"replay_buffer/rows.npy": npy(rows)})
    assert_refused(tmp_path, capsys, forged, reason, "-n", "100")


def test_replay_buffer_position_outside_the_buffer_exits_2_before_the_run_folder(tmp_path, capsys, model):
    """Today the ring position is taken modulo the capacity, silently: the next inserts land elsewhere."""
    forged = forge(model, tmp_path / "position.zip", {"replay_buffer/position.npy": npy(np.asarray(5000, np.int32))})
    assert resume(tmp_path, forged, "-n", "100") == 2
    assert capsys.readouterr().err == (
        f"error: cannot resume from {forged}: replay_buffer/position.npy holds 5000, expected an integer in [0, 1000)\n"
    )
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    "rows,position,message",
    [
        (
            np.zeros((5, 5), np.float32),
            0,
            r"replay_buffer/rows.npy holds float32\[5, 5\], expected float32\[n, 5\] "
            r"with n <= buffer_size=4 \(obs_dim=1, action_dim=1\)",
        ),
        (np.zeros((3, 5), np.float32), 4, r"replay_buffer/position.npy holds 4, expected an integer in \[0, 4\)"),
    ],
)
def test_buffer_from_arrays_names_the_member_that_does_not_fit(rows, position, message):
    """The runner's own check (for callers other than train.py -i): no raw numpy broadcast error."""
    from rlbench.buffers.uniform import buffer_from_arrays, make_uniform_buffer
    from rlbench.types import EnvSpec

    arrays = {"rows": rows, "position": np.asarray(position, np.int32), "capacity": np.asarray(4)}
    with pytest.raises(ValueError, match=message):
        buffer_from_arrays(make_uniform_buffer(4, EnvSpec(1, 1)), arrays)


def delete(*keys):
    def edit(manifest):
        *parents, last = keys
        for key in parents:
            manifest = manifest[key]
        del manifest[last]

    return edit


def assign(value, *keys):
    def edit(manifest):
        *parents, last = keys
        for key in parents:
            manifest = manifest[key]
        manifest[last] = value

    return edit


@pytest.mark.parametrize(
    "edit,reason",
    [
        (delete("hyperparams"), "the manifest has no hyperparams"),
        (
            assign("abc", "counters", "env_steps"),
            "manifest counters.env_steps: expected a non-negative integer, got 'abc'",
        ),
        (delete("counters"), "the manifest has no counters"),
        (assign(True, "seed"), "manifest seed: expected a non-negative integer, got True"),
        (assign(7, "algo"), "manifest algo: expected a string, got 7"),
        (delete("env_id"), "the manifest has no env_id"),
        (
            assign(["x"], "spaces", "observation", "shape"),
            "manifest spaces.observation.shape[0]: expected an integer >= 1, got 'x'",
        ),
        (assign("2", "n_envs"), "manifest n_envs: expected an integer >= 1, got '2'"),
        (assign(0, "n_envs"), "manifest n_envs: expected an integer >= 1, got 0"),
        (delete("host", "pending_count"), "the manifest has no host.pending_count"),
        (assign([], "host"), "manifest host: expected a mapping, got []"),
        (
            assign("MT19937", "host", "warmup_rng", "bit_generator"),
            "manifest host.warmup_rng: not a PCG64 generator state (state must be for a PCG64 RNG)",
        ),
        (
            assign("x", "host", "warmup_rng", "state", "inc"),
            "manifest host.warmup_rng.state.inc: expected a non-negative integer, got 'x'",
        ),
        (
            assign([None, None], "host", "episode_starts"),
            "manifest host.episode_starts: 2 entries, expected one per env (n_envs=1)",
        ),
        (assign({"state.msgpack": 5}, "members"), "manifest members['state.msgpack']: expected a string, got 5"),
        (assign(0, "hyperparams", "buffer_size"), "manifest hyperparams.buffer_size: expected an integer >= 1, got 0"),
        # Issue 32: integers fit 64 bits (2**63 env steps made -i blame -n), as every integer setting.
        (
            assign(2**63, "counters", "env_steps"),
            "manifest counters.env_steps: 9223372036854775808 is too large (at most 2**63-1)",
        ),
        (
            assign(2**64, "hyperparams", "buffer_size"),
            "manifest hyperparams.buffer_size: 18446744073709551616 is too large (at most 2**63-1)",
        ),
        # Issue 32: how an env's episode began reached int(), gymnasium and getattr(np.random, ...) unchecked.
        *(
            (
                assign([start], "host", "episode_starts"),
                rf"manifest host.episode_starts[0]: expected null, {{seed: <non-negative integer>}} or {{rng: "
                rf"<the state of numpy's PCG64, PCG64DXSM, MT19937, Philox, SFC64>}}, either with resets: <strictly "
                rf"increasing non-negative integers>, got {start!r}",
            )
            for start in (
                {"seed": "x"},
                {"seed": -5},
                {"rng": {"bit_generator": "seed"}},
                {},
                # Where a reset carried an Atari game on (a life lost): positions in the episode's actions.
                {"seed": 1, "resets": [4, 2]},
                {"seed": 1, "resets": [-1]},
                {"seed": 1, "resets": "3"},
                {"resets": [1]},
            )
        ),
    ],
)
def test_manifest_missing_or_mistyped_key_is_named(tmp_path, capsys, model, edit, reason):
    """Item 10: a one-line error naming the key and what it should be, not a KeyError or TypeError."""
    forged = forge(model, tmp_path / "manifest.zip", edit=edit)
    assert_refused(tmp_path, capsys, forged, reason, "-n", "100")


def test_state_larger_than_the_configuration_needs_is_refused_unread(tmp_path, capsys, model):
    forged = forge(model, tmp_path / "state.zip", {"state.msgpack": bytes(2**20)})
    assert_refused(
        tmp_path,
        capsys,
        forged,
        "state.msgpack declares 1048576 bytes, more than this configuration's learner state needs",
    )


def test_resuming_under_another_env_id_warns_naming_both(tmp_path, capsys, model):
    """Item 11: same spaces, other id (here a checkpoint that says it was trained on Pendulum-v0)."""
    forged = forge(model, tmp_path / "other_env.zip", edit=assign("Pendulum-v0", "env_id"))
    assert resume(tmp_path, forged, "-n", "1") == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "Pendulum-v0" in line]
    assert warnings == [f"Warning: {forged} was trained on Pendulum-v0, this run uses --env Pendulum-v1"]
    # Other spaces: the one-line error alone, which names the saved env already.
    assert (
        main(
            ["-f", str(tmp_path / "other"), *TINY[:2], "--env", "MountainCarContinuous-v0", *TINY[4:], "-i", str(model)]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("error: observation space mismatch") and len(err.splitlines()) == 1, err


def test_a_checkpoint_from_before_member_sizes_still_resumes(tmp_path, capsys, model):
    """Format version 2 without the manifest's `sizes`: every other bound still applies, and it resumes."""
    forged = forge(model, tmp_path / "older.zip", edit=delete("sizes"))
    assert resume(tmp_path, forged, "-n", "1") == 0


# -- issue 32: deep nesting, counts and shapes bounded before anything is sized, other libraries' models ------


def with_manifest_text(model, target, text):
    """`model` with its manifest.json replaced by `text` (the other members and their checksums kept)."""
    with zipfile.ZipFile(model) as source, zipfile.ZipFile(target, "w") as archive:
        for info in source.infolist():
            if info.filename != "manifest.json":
                archive.writestr(info, source.read(info))
        archive.writestr("manifest.json", text)
    return target


def nested_msgpack(depth: int) -> bytes:
    return b"\x81\xa1a" * depth + b"\xc0"  # {"a": {"a": ... nil}}


def test_manifest_of_5000_nested_arrays_is_one_line(tmp_path, capsys, model):
    """Item 1: json.loads raised RecursionError, a traceback."""
    forged = with_manifest_text(model, tmp_path / "deep.zip", "[" * 5000 + "]" * 5000)
    assert_refused(tmp_path, capsys, forged, "unreadable manifest: nested too deeply to parse)")


@pytest.mark.parametrize(
    "state,reason",
    [
        (nested_msgpack(1000), "state.msgpack is not a readable learner state (nested more than 64 levels deep)"),
        (nested_msgpack(5000), "state.msgpack is not a readable learner state (nested too deeply to parse)"),
    ],
    ids=["1000 levels", "5000 levels"],
)
def test_deeply_nested_learner_state_is_one_line(tmp_path, capsys, model, state, reason):
    """Item 1: flax's restore recursed into a RecursionError traceback (msgpack itself stops at 1,024 levels)."""
    forged = forge(model, tmp_path / "state.zip", {"state.msgpack": state})
    assert_refused(tmp_path, capsys, forged, reason)


def test_space_shape_beyond_its_bounds_is_refused_before_a_network_is_sized(tmp_path, capsys, model):
    """Item 2: np.prod([2**40, 2**40]) overflowed to 0 and the network initialisers divided by it."""
    forged = forge(model, tmp_path / "shape.zip", edit=assign([2**40, 2**40], "spaces", "observation", "shape"))
    assert_refused(
        tmp_path,
        capsys,
        forged,
        f"manifest spaces.observation: shape [1099511627776, 1099511627776] describes {2**80} values, "
        "but its low and high list 3 and 3)",
    )


FORGED_N_ENVS = """
import resource, sys, time
from rlbench.cli.train import main
start = time.monotonic()
code = main(sys.argv[1:])
print("measured", code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, time.monotonic() - start)
"""


def test_forged_n_envs_is_bounded_by_the_file_before_anything_is_sized(tmp_path, model):
    """Item 2: n_envs 10**7 built one expectation per env (82 s, 3 GB) before the members refused it."""

    def edit(manifest):
        manifest["n_envs"] = 10**7
        manifest["host"]["episode_starts"] = None  # no per-env list to betray the count

    forged = forge(model, tmp_path / "n_envs.zip", edit=edit)
    argv = ["-f", str(tmp_path / "logs"), *TINY, "-i", str(forged)]
    try:
        proc = subprocess.run(
            [sys.executable, "-c", FORGED_N_ENVS, *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a forged n_envs of 10**7 was not refused within 30 s")
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("measured")]
    _, code, peak_mib, _ = line.split()
    assert int(code) == 1 and int(peak_mib) < 1024, line
    assert proc.stderr == (
        f"error: corrupt or incomplete checkpoint: {forged} (the manifest makes host/obs.npy [10000000, 3]: "
        f"30000000 values, more than the whole file ({forged.stat().st_size} bytes) holds (a forged n_envs, "
        "count or space?))\n"
    )
    assert not (tmp_path / "logs").exists()


def test_values_from_the_checkpoint_are_not_attributed_to_flags(tmp_path, capsys, model):
    """Item 14: a manifest's seed was reported as `--seed ...`, its step count as `n_timesteps (-n)`."""
    forged = forge(model, tmp_path / "seed.zip", edit=assign(2**40, "seed"))
    assert_refused(
        tmp_path, capsys, forged, f"manifest seed: seeds are in [0, 2**32-1], the checkpoint's run goes up to {2**40})"
    )
    forged = forge(model, tmp_path / "steps.zip", edit=assign(2**63 - 5, "counters", "env_steps"))
    assert resume(tmp_path, forged, "-n", "10") == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: n_timesteps ({2**63 - 5} env steps saved in {forged} + -n 10): {2**63 + 5} is too large "
        "(an integer setting must fit 64 bits, at most 2**63-1)\n"
    )
    assert not (tmp_path / "logs").exists()


def sb3_model(path):
    """The members of a Stable-Baselines3 2.x zip (an RL Zoo model), with placeholder contents."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", json.dumps({"policy_class": {":type:": "<class 'abc.ABCMeta'>"}}))
        for name in ("pytorch_variables.pth", "policy.pth", "policy.optimizer.pth"):
            archive.writestr(name, b"PK\x03\x04 torch")
        archive.writestr("_stable_baselines3_version", "2.3.2")
        archive.writestr("system_info.txt", "- OS: Linux")
    return path


def test_an_sb3_model_is_named_as_one(tmp_path, capsys):
    """Item 14: it was called `corrupt or incomplete checkpoint (no manifest.json: the write did not complete)`."""
    model = sb3_model(tmp_path / "Pendulum-v1.zip")
    assert resume(tmp_path, model) == 2
    assert capsys.readouterr().err == (
        f"error: {model} is a Stable-Baselines3 / RL Zoo model (a zip of PyTorch weights: data, policy.pth), which "
        "rlbench cannot load: enjoy.py and -i read only rlbench's own checkpoints (train one with train.py)\n"
    )
    assert not (tmp_path / "logs").exists()


def test_manifest_hyperparameters_are_bounded_before_they_are_walked_or_printed(tmp_path, capsys, model):
    """Item 12: a value of 300,000 numbers reached the env probe, whose one-line error printed all of them."""
    forged = forge(model, tmp_path / "big.zip", edit=assign({"g": [0] * 300_000}, "hyperparams", "env_kwargs"))
    assert resume(tmp_path, forged, "-n", "10") == 2
    assert capsys.readouterr().err == (
        f"error: {forged}: holds more than 200000 values (YAML aliases counted as expanded)\n"
    )
    assert not (tmp_path / "logs").exists()


def test_saved_network_and_buffer_size_are_not_attributed_to_params(tmp_path, capsys, model):
    """Item 14: a checkpoint's own net_arch was reported as `-params policy_kwargs net_arch`, and its replay
    buffer's size came with advice to pass -params buffer_size, which a resume restoring it cannot take."""
    forged = forge(model, tmp_path / "arch.zip", edit=assign([16], "hyperparams", "policy_kwargs", "net_arch"))
    assert resume(tmp_path, forged, "-n", "10") == 2
    assert capsys.readouterr().err == (
        f"error: policy_kwargs net_arch saved in {forged}: [16] is not the resolved form rlbench saves "
        "({'pi': [16], 'qf': [16]}): the checkpoint was edited, or not written by rlbench\n"
    )
    forged = forge(model, tmp_path / "buffer.zip", edit=assign(10**12, "hyperparams", "buffer_size"))
    assert resume(tmp_path, forged, "-n", "10") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: replay buffer needs ") and err.count("\n") == 1, err
    assert err.endswith(
        f"is available; {forged} restores its replay buffer at its saved buffer_size 1,000,000,000,000\n"
    )
    assert not (tmp_path / "logs").exists()
