"""The CMA-ES state check (rlbench.tuning.stored): what Optuna would unpickle from a trial's system
attributes is unpickled first with CMA-ES's and numpy's classes only, and a pickle that would make the C
unpickler allocate gigabytes is refused unread."""

import pickle
import struct

import numpy as np

from rlbench.tuning.stored import cma_state_problem

KEY = "cma:optimizer:0"


def test_numpy_arrays_pass_and_other_classes_are_refused():
    assert cma_state_problem({KEY: pickle.dumps(np.arange(3.0)).hex()}) is None
    problem = cma_state_problem({KEY: pickle.dumps(print).hex()})
    assert problem.endswith("(it refers to builtins.print, which a CMA-ES state never holds)")


def test_a_memo_index_past_the_pickle_is_refused_before_unpickling():
    huge = b"\x80\x04]r" + struct.pack("<I", 2**32 - 1) + b"."  # PROTO 4, EMPTY_LIST, LONG_BINPUT 2**32-1, STOP
    assert "memo index 4294967295 past the pickle's 9 bytes" in cma_state_problem({KEY: huge.hex()})


def test_chunks_must_be_hex_strings_numbered_from_zero():
    assert "non-hexadecimal" in cma_state_problem({KEY: "zz"})
    assert "expected strings cma:optimizer:0" in cma_state_problem({KEY: "00", "cma:optimizer:2": "00"})
    assert "expected strings" in cma_state_problem({KEY: 5})
