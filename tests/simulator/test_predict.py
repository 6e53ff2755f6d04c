"""predict.phase_table: the observed (or modelled) phases by op, as fit_check, whatif's
table and a run's summary read them."""

from dpmstream.simulator.predict import phase_table


def test_phase_table_holds_each_ops_values_sorted_and_leaves_out_phases_nobody_has():
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
