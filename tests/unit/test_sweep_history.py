"""A continued sweep cell's progress.csv and Monitor files joined across its attempts (issue 32, item 4)."""

import csv
import io
import json

from rlbench.sweep.history import Attempt, join_attempts


def write_attempt(folder, steps, t_start, episodes, step_key="time/total_timesteps"):
    """A run folder: progress.csv rows at `steps`, two Monitor files of `episodes` (env, return, t)."""
    folder.mkdir(parents=True)
    rows = "".join(f"{step},{step / 10}\n" for step in steps)
    (folder / "progress.csv").write_text(f"{step_key},rollout/ep_rew_mean\n" + rows)
    for env in (0, 1):
        header = "#" + json.dumps({"t_start": t_start, "env_id": "Pendulum-v1"}) + "\n"
        lines = "".join(f"{r},200,{t}\r\n" for e, r, t in episodes if e == env)
        (folder / f"{env}.monitor.csv").write_text(header + "r,l,t\r\n" + lines)
    return folder


def monitor_rows(path):
    first, _, rest = path.read_text().partition("\n")
    return json.loads(first[1:])["t_start"], [(row["r"], float(row["t"])) for row in csv.DictReader(io.StringIO(rest))]


def test_each_attempt_is_cut_where_the_next_continued_and_times_count_from_the_first_start(tmp_path):
    # Attempt 1 checkpointed at 400 env steps after 3 episodes, then logged on until it was killed at 600.
    first = write_attempt(
        tmp_path / "a1",
        [100, 200, 300, 400, 500, 600],
        1000.0,
        [(0, -1, 1.0), (1, -2, 1.5), (0, -3, 2.0), (1, -9, 3.0)],
    )
    # Attempt 2 continued from 400 and checkpointed at 800 after 5 episodes in all (2 of its own), then stopped.
    second = write_attempt(
        tmp_path / "a2", [500, 600, 700, 800, 900], 2000.0, [(1, -4, 0.5), (0, -5, 0.6), (0, -8, 9.0)]
    )
    final = write_attempt(tmp_path / "a3", [900, 1000], 3000.0, [(0, -6, 0.25), (1, -7, 0.75)])
    join_attempts(final, [Attempt(first, 400, 3), Attempt(second, 800, 5)])

    lines = (final / "progress.csv").read_text().splitlines()
    assert lines[0] == "time/total_timesteps,rollout/ep_rew_mean"
    assert [int(line.split(",")[0]) for line in lines[1:]] == [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    t_start, env_0 = monitor_rows(final / "0.monitor.csv")
    assert t_start == 1000.0 and env_0 == [("-1", 1.0), ("-3", 2.0), ("-5", 1000.6), ("-6", 2000.25)]
    t_start, env_1 = monitor_rows(final / "1.monitor.csv")
    assert t_start == 1000.0 and env_1 == [("-2", 1.5), ("-4", 1000.5), ("-7", 2000.75)]
    assert (final / "0.monitor.csv").read_text().splitlines()[1] == "r,l,t"


def test_an_attempt_logged_under_the_old_step_name_is_joined_under_sb3s(tmp_path):
    # A sweep started before the rename to SB3's keys (time/env_steps) and continued after it.
    first = write_attempt(tmp_path / "a1", [100, 200, 300], 1000.0, [(0, -1, 1.0)], step_key="time/env_steps")
    final = write_attempt(tmp_path / "a2", [300, 400], 2000.0, [(0, -2, 0.5)])
    join_attempts(final, [Attempt(first, 200, 1)])
    rows = list(csv.DictReader((final / "progress.csv").open()))
    assert [(row["time/total_timesteps"], row["rollout/ep_rew_mean"]) for row in rows] == [
        ("100", "10.0"),
        ("200", "20.0"),
        ("300", "30.0"),
        ("400", "40.0"),
    ]


def test_a_cell_that_was_never_continued_is_left_as_it_is(tmp_path):
    final = write_attempt(tmp_path / "a1", [100], 1000.0, [(0, -1, 1.0)])
    before = {path.name: path.read_bytes() for path in final.iterdir()}
    join_attempts(final, [])
    assert {path.name: path.read_bytes() for path in final.iterdir()} == before


def test_printable_escapes_what_would_drive_a_terminal_and_keeps_the_rest():
    from rlbench.redact import printable

    assert printable("python -m rlbench.sweep \x1b]0;owned\x07 --name é\u202eh\r") == (
        "python -m rlbench.sweep \\x1b]0;owned\\x07 --name é\\u202eh\\r"
    )
