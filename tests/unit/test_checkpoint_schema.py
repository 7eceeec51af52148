"""checkpoint_schema: the sizes a manifest gives are bounded with Python integers before anything is sized."""

import pytest

from rlbench.store.schema import Expected, ManifestError, UpTo, space_sizes


def space(shape, values):
    return {"shape": shape, "dtype": "float32", "low": [0.0] * values, "high": [0.0] * values}


def test_space_sizes_are_the_values_the_bounds_list():
    assert space_sizes({"spaces": {"observation": space([2, 3], 6), "action": space([1], 1)}}) == (6, 1)


def test_a_shape_whose_product_overflows_int64_is_refused_not_wrapped():
    manifest = {"spaces": {"observation": space([2**40, 2**40], 3), "action": space([1], 1)}}
    with pytest.raises(ManifestError, match=f"describes {2**80} values, but its low and high list 3 and 3"):
        space_sizes(manifest)


@pytest.mark.parametrize(
    "name,shape",
    [
        ("host/episode_actions_0", (UpTo(7), 1)),
        ("host/episode_actions_2", (UpTo(7), 1)),
        ("host/episode_actions_3", None),  # past n_envs
        ("host/episode_actions_01", None),  # one member per index, one spelling
        ("host/episode_actions_\u0661", None),  # an Arabic-Indic digit: int() reads it, the writer never does
        ("host/episode_actions_", None),
        pytest.param("host/episode_actions_" + "1" * 5000, None, id="5000 digits"),  # past int()'s 4,300
    ],
)
def test_numbered_members_are_matched_by_name_without_one_entry_per_env(name, shape):
    expected = Expected(closed=True, numbered={"host/episode_actions_": (3, (UpTo(7), 1))})
    assert expected.shape_of(name) == shape
    assert expected.allows(name) == (shape is not None)
    huge = Expected(closed=True, numbered={"host/episode_actions_": (10**18, (UpTo(7), 1))})
    assert huge.allows("host/episode_actions_999999999999")  # no structure of 10**18 entries was built


def test_a_required_member_larger_than_the_file_is_refused():
    expected = Expected(shapes={"host/obs": (10**8, 3), "replay_buffer/rows": (UpTo(10**9), 9)})
    expected.check_file_holds(300_000_000)
    with pytest.raises(ManifestError, match=r"host/obs.npy \[100000000, 3\]: 300000000 values, more than the whole"):
        expected.check_file_holds(299_999_999)
