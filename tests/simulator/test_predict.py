"""predict.phase_table: the observed (or modelled) phases by op, as fit_check, whatif's
table and a run's summary read them."""

import random

import pytest

from dpmstream.parsers.records import PHASES
from dpmstream.simulator.predict import phase_table, python_phase_table

try:
    from dpmstream.parsers._native import phase_columns
except ImportError:  # not built
    phase_columns = None


@pytest.mark.parametrize("phase_table", [phase_table, python_phase_table],
                         ids=["as_built", "python"])
def test_phase_table_holds_each_ops_values_sorted_and_leaves_out_phases_nobody_has(phase_table):
    records = [
        {"op": "put", "auth_ms": 30, "queue_ms": 5, "total_ms": 900},
        {"op": "get", "auth_ms": 7, "total_ms": 40},
        {"op": "put", "auth_ms": 10, "queue_ms": None, "total_ms": 100},
        {"op": "put", "auth_ms": 20, "queue_ms": 0, "total_ms": 500},
        {"op": "ping", "auth_ms": 1},          # not a put or get: not in the table
    ]
    # Sorted, so that each quantile taken of a list later sorts it in one pass.
    assert phase_table(records) == {
        ("put", "auth"): [10, 20, 30],
        ("put", "queue"): [0, 5],
        ("put", "total"): [100, 500, 900],
        ("get", "auth"): [7],
        ("get", "total"): [40],
    }


@pytest.mark.skipif(phase_columns is None, reason="the compiled extension is not built")
def test_the_compiled_phase_table_is_the_python_one():
    """native/src/calibrate_columns.rs phase_columns against python_phase_table, the
    reference, in its order too (puts' phases, then gets', in PHASES' order): the model's
    records and random ones (any phase None or missing, ops other than put and get or
    none); a value that is not an int goes the Python way."""
    from dpmstream.simulator import SimConfig, simulate

    cases = [simulate(SimConfig(requests=300, seed=5, get_fraction=0.4), None).requests]
    rng = random.Random(36)
    for _ in range(200):
        records = []
        for _ in range(rng.randrange(0, 30)):
            record = {"op": rng.choice(("put", "get", "ping", None))}
            for field_name, _ in PHASES:
                if rng.random() < 0.8:
                    record[field_name] = rng.choice((None, rng.randrange(-5, 5000)))
            if rng.random() < 0.1:
                del record["op"]
            records.append(record)
        cases.append(records)
    for records in cases:
        compiled = phase_columns(records, PHASES)
        assert compiled == python_phase_table(records)
        assert list(compiled) == list(python_phase_table(records))
    odd = [{"op": "put", "queue_ms": 2.5}, {"op": "put", "queue_ms": 1}]
    with pytest.raises(TypeError):
        phase_columns(odd, PHASES)
    assert phase_table(odd) == {("put", "queue"): [1, 2.5]}
