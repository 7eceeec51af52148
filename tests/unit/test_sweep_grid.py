"""The sweep's grid, tasks and packing, by hand (no Ray)."""

import pytest

from rlbench.errors import ConfigError
from rlbench.sweep.grid import Cell, SweepSpec, check_learner_values, default_name, make_tasks, parse_grid
from rlbench.sweep.packing import choose_packing, describe_need, fitting_nodes


def test_grid_values_split_at_top_level_commas_only():
    axes = parse_grid(["policy_delay:1,3", "net_arch:[64,64],[256, 256]", "policy_kwargs:dict(a=1,b=2),None"])
    assert axes == (
        ("policy_delay", ("1", "3")),
        ("net_arch", ("[64,64]", "[256, 256]")),
        ("policy_kwargs", ("dict(a=1,b=2)", "None")),
    )
    for bad, message in (
        ("gamma", "expected KEY:VALUE1,VALUE2"),
        ("gamma:0.9,", "an empty value"),
        ("gamma:0.9,0.9", "listed twice"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_grid([bad])
    with pytest.raises(ConfigError, match="already an axis"):
        parse_grid(["gamma:0.9", "gamma:0.99"])


def test_grid_values_of_learner_keys_are_read_by_each_algorithm_before_anything_runs():
    """Issue 35 items 3 and 6: the temperature-loss study's grid is accepted for the whole SAC family; a value of
    the wrong type is one line naming the key, the value, the valid values and the algorithm."""
    algos = ("sac", "droq", "tqc", "crossq")
    check_learner_values(algos, parse_grid(["temperature_loss:log_alpha,alpha", "n_envs:1,0", "gamma:0.9,0.99"]))
    for grid, message in (
        ("temperature_loss:log_alpha,1", "temperature_loss: expected log_alpha (SB3's, and SBX's since 0.18) or "
         "alpha (SBX's before 0.18), got 1 (from --grid temperature_loss:1, --algos sac)"),
        ("batch_size:8,abc", "batch_size: expected a number, got 'abc' (from --grid batch_size:abc, --algos sac)"),
        ("policy_kwargs:dict(batch_norm=True)", "policy_kwargs.batch_norm: BatchRenorm is CrossQ's; use --algo crossq"),
        ("batch_norm:True", "unknown hyperparameter 'batch_norm' in --grid batch_norm:True, --algos sac;"),
    ):  # fmt: skip
        with pytest.raises(ConfigError) as raised:
            check_learner_values(algos, parse_grid([grid]))
        assert str(raised.value).startswith(message), raised.value
    check_learner_values(("crossq",), parse_grid(["policy_kwargs:dict(batch_norm=True),None"]))  # its own key


def test_cells_are_the_product_and_a_cell_s_params_are_shared_then_its_algo_s_then_its_setting():
    spec = SweepSpec(
        name="s",
        algos=("sac", "crossq"),
        envs=("Pendulum-v1",),
        seeds=(1, 2),
        params=("gamma:0.9", "tau:0.01"),
        params_for=(("crossq", ("gamma:0.95",)),),
        grid=(("policy_delay", ("1", "3")), ("tau", ("0.02", "0.05"))),
    )
    cells = spec.cells()
    assert len(cells) == 2 * 1 * 4 * 2 and len({cell.key for cell in cells}) == len(cells)
    crossq = next(c for c in cells if c.algo == "crossq" and c.setting == (("policy_delay", "3"), ("tau", "0.05")))
    assert crossq.params(spec) == ("gamma:0.95", "tau:0.05", "policy_delay:3")  # later wins, one token per key
    assert crossq.key == "crossq/Pendulum-v1/policy_delay=3,tau=0.05/1"
    assert crossq.setting_label == "policy_delay=3 tau=0.05"
    assert spec.record()["grid"] == {"policy_delay": ["1", "3"], "tau": ["0.02", "0.05"]}


def test_tasks_take_up_to_k_consecutive_seeds_of_one_algo_env_and_setting():
    a = [Cell("sac", "E", (), seed) for seed in (1, 2, 3, 5, 6)]
    b = [Cell("sac", "E", (("gamma", "0.9"),), seed) for seed in (1, 2)]
    tasks = make_tasks([*a, *b], seeds_per_process=2)
    assert [[c.seed for c in t.cells] for t in tasks] == [[1, 2], [3], [5, 6], [1, 2]]
    assert tasks[3].cells[0].setting == (("gamma", "0.9"),)
    assert len({t.id for t in tasks}) == 4 and tasks[0].id.endswith("_s1-2") and tasks[1].id.endswith("_s3")
    assert make_tasks(a, 1)[0].id == make_tasks(a, 1)[0].id  # the same cells give the same id in every invocation


def test_default_names_are_plain_folder_names():
    assert default_name(["sac", "crossq"], ["HalfCheetah-v4"]) == "sac-crossq_HalfCheetah-v4"
    assert default_name(["sac"], ["tests.envs:SeedBlowUp-v0"]) == "sac_tests.envs_SeedBlowUp-v0"
    long = default_name(["sac"], [f"Env{i}-v4" for i in range(30)])
    assert len(long) <= 100 and long != default_name(["sac"], [f"Env{i}-v4" for i in range(31)])


def test_packing_pins_one_seed_per_core_on_cpus_and_packs_seeds_and_fractional_gpus_on_gpus():
    cpu = choose_packing({"CPU": 16.0}, n_seeds=32)
    assert (cpu.seeds_per_process, cpu.cpus_per_run, cpu.gpus_per_run, cpu.pin, cpu.device) == (1, 1, 0, True, "cpu")
    assert "313 vs 216" in cpu.reason
    gpu = choose_packing({"CPU": 16.0, "GPU": 1.0}, n_seeds=32)
    assert (gpu.seeds_per_process, gpu.gpus_per_run, gpu.pin, gpu.device) == (8, 0.25, False, "gpu")
    assert choose_packing({"CPU": 16.0, "GPU": 1.0}, n_seeds=3).seeds_per_process == 3
    forced = choose_packing({"CPU": 16.0, "GPU": 1.0}, n_seeds=32, seeds_per_process=4, gpus_per_run=0)
    assert (forced.seeds_per_process, forced.gpus_per_run, forced.device) == (4, 0, "cpu")
    assert "flags override" in forced.reason
    assert not choose_packing({"CPU": 2.0}, 4, cpus_per_run=0.5).pin  # half a core cannot be pinned
    assert "pinned to its own core," in cpu.reason
    assert "pinned to its own 2 cores," in choose_packing({"CPU": 4.0}, 4, cpus_per_run=2).reason
    with pytest.raises(ConfigError, match="--gpus-per-run: above 1, a whole number"):
        choose_packing({"GPU": 4.0}, 4, gpus_per_run=1.5)
    with pytest.raises(ConfigError, match="--seeds-per-process"):
        choose_packing({"CPU": 2.0}, 4, seeds_per_process=0)


def test_the_packing_line_counts_the_cores_and_a_process_no_node_fits_is_named_with_the_nodes():
    assert "1 CPU each, pinned to its own core," in choose_packing({"CPU": 4.0}, 2).reason
    two = choose_packing({"CPU": 4.0}, 2, cpus_per_run=2)
    assert "2 CPU each, pinned to its own 2 cores," in two.reason
    nodes = [{"CPU": 2.0}, {"CPU": 1.0, "GPU": 1.0}]
    assert fitting_nodes(two, nodes) == 1 and fitting_nodes(choose_packing({}, 1, cpus_per_run=4), nodes) == 0
    gpu = choose_packing({"CPU": 2.0}, 1, gpus_per_run=1, cpus_per_run=2)
    assert fitting_nodes(gpu, nodes) == 0
    assert describe_need(gpu, nodes) == (
        "each process needs 2 CPU and 1 GPU, and no node has that (nodes: 2 CPU no GPU, 1 CPU 1 GPU); "
        "lower --cpus-per-run / --gpus-per-run"
    )


def test_a_run_folder_sent_back_is_unpacked_only_if_it_holds_plain_files_below_one_folder(tmp_path):
    import io
    import tarfile

    from rlbench.sweep.cell import pack, unpack

    run = tmp_path / "staged" / "Pendulum-v1_1"
    (run / "Pendulum-v1").mkdir(parents=True)
    (run / "Pendulum-v1" / "config.yml").write_text("gamma: 0.9\n")
    unpack(pack(run), tmp_path / "Pendulum-v1_7")
    assert (tmp_path / "Pendulum-v1_7" / "Pendulum-v1" / "config.yml").read_text() == "gamma: 0.9\n"

    def archive(*members):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for name, kind in members:
                info = tarfile.TarInfo(name)
                info.type = kind
                if kind == tarfile.SYMTYPE:
                    info.linkname = "/etc/passwd"
                tar.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
        return buffer.getvalue()

    for bad in (
        archive(("run/../../escape", tarfile.REGTYPE)),
        archive(("run/link", tarfile.SYMTYPE)),
        archive(("a/x", tarfile.REGTYPE), ("b/y", tarfile.REGTYPE)),
        archive(("/abs/x", tarfile.REGTYPE)),
    ):
        with pytest.raises(ValueError):
            unpack(bad, tmp_path / "out")
        assert not (tmp_path / "out").exists() and not (tmp_path.parent / "escape").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Pendulum-v1_7", "staged"]  # no temporary left


def test_the_help_s_description_is_the_whole_first_paragraph_of_the_module_docstring():
    from rlbench.sweep import command as sweep

    description = sweep.build_parser().description
    assert description.endswith("with a returns report at the end.") and "\n" not in description


def test_runs_shorter_than_eval_freq_are_named_with_lengths_from_n_params_grid_or_their_file(tmp_path):
    """Issue 32, item 11: the note at the start also when the lengths come from the hyperparameter file."""
    from rlbench.sweep.command import build_parser, spec_from_args
    from rlbench.sweep.final_eval import short_runs_note

    def note(*argv: str) -> str | None:
        return short_runs_note(spec_from_args(build_parser().parse_args(["--seeds", "2", *argv])))

    assert note("--algos", "sac", "--envs", "Pendulum-v1") is None  # 20000 steps in sac.yml, eval every 10000
    assert note("--algos", "sac", "--envs", "Pendulum-v1", "-n", "300").startswith(
        "Note: runs of 300 env steps are shorter than --eval-freq 10000, so train.py evaluates none of them"
    )
    found = note("--algos", "sac", "tqc", "--envs", "Pendulum-v1", "MountainCarContinuous-v0", "--eval-freq", "30000")
    assert found.startswith(
        "Note: runs sac Pendulum-v1 (20000 env steps); tqc Pendulum-v1 (20000 env steps) are shorter than "
        "--eval-freq 30000"
    )  # MountainCarContinuous-v0's 50000 steps are not
    grid = note("--algos", "sac", "--envs", "Pendulum-v1", "--grid", "n_timesteps:500,20000")
    assert "runs sac Pendulum-v1 n_timesteps=500 (500 env steps) are shorter" in grid
    conf = tmp_path / "mine.yml"
    conf.write_text("default:\n  n_timesteps: !!float 2e3\n")
    found = note("--algos", "sac", "--envs", "Hopper-v4", "-conf", str(conf))
    assert "runs sac Hopper-v4 (2000 env steps) are" in found
    conf.write_text("Pendulum-v1:\n  gamma: 0.9\n")  # no length: -n's default applies in the cell, nothing here
    assert note("--algos", "sac", "--envs", "Pendulum-v1", "-conf", str(conf)) is None


def test_device_gpu_n_names_the_n_th_visible_gpu_for_the_private_instance_or_says_what_there_is():
    """Issue 32, item 14: `--device cuda:1` in a sweep picks this machine's GPU 1 for every process."""
    from rlbench.sweep.private_ray import visible_gpu

    assert visible_gpu(1, None, 4) == "1"
    assert visible_gpu(1, "3,5", 8) == "5"  # the second of the GPUs this process may use
    assert visible_gpu(0, "GPU-8a1f", None) == "GPU-8a1f"  # a UUID, and a Ray that cannot count
    for index, visible, count, message in (
        (2, None, 2, "--device gpu:2: this machine has 2 GPUs; use gpu:0 to gpu:1"),
        (1, "3,5", 1, "--device gpu:1: CUDA_VISIBLE_DEVICES=3,5 leaves 1 GPU; use gpu:0 to gpu:0"),
        (0, None, 0, "--device gpu:0: this machine has 0 GPUs; use --device cpu/auto"),
        (0, "", 4, "--device gpu:0: CUDA_VISIBLE_DEVICES= leaves 0 GPUs; use --device cpu/auto"),
    ):
        with pytest.raises(ConfigError) as raised:
            visible_gpu(index, visible, count)
        assert str(raised.value) == message
