"""The student's lab table: per configuration their own finished live runs with the row's params, the newest
`repeats` of them, median and spread per metric; replays, other owners' runs, other params and runs still going are
not measurements (a run in progress is counted as such)."""
from __future__ import annotations

import pytest

from demos.models import Run
from labs.table import lab_table
from lab_helpers import make_lab, store_run

ME, OTHER = "u:1", "u:2"
pytestmark = pytest.mark.django_db


def rows(table) -> dict:
    return {row["id"]: row for row in table["rows"]}


def test_median_and_spread_of_the_newest_runs_and_the_fp32_side_read_from_the_int4_runs():
    lab = make_lab()
    store_run(ME, "int4-g128", 100.0, fp32_tps=10.0)  # the oldest of four: past `repeats`, not in the table
    for quant, fp32 in ((190.0, 46.0), (170.0, 44.0), (200.0, 48.0)):
        store_run(ME, "int4-g128", quant, fp32_tps=fp32)
    table = lab_table(lab, (ME,))
    int4, fp32 = rows(table)["int4"], rows(table)["fp32"]
    assert int4["runs"] == 3 and int4["complete"]
    assert int4["stats"]["decode_tokens_per_s"] == {"median": 190.0, "min": 170.0, "max": 200.0, "n": 3}
    assert fp32["stats"]["decode_tokens_per_s"] == {"median": 46.0, "min": 44.0, "max": 48.0, "n": 3}
    assert fp32["stats"]["weight_bytes_per_token"]["median"] == pytest.approx(538.0)
    assert int4["stats"]["weight_bytes_per_token"]["median"] == pytest.approx(72.0)
    assert fp32["shares_runs_with"] == ["int4"] and fp32["run_ids"] == int4["run_ids"]
    assert int4["device"] == "cpu" and int4["engine_version"] == "abc123def456" and not int4["mixed_setup"]
    assert table["complete"] is False and [m["id"] for m in table["missing"]] == ["int8"]


def test_replays_other_owners_other_params_and_unfinished_runs_are_not_measurements():
    lab = make_lab()
    mine = store_run(ME, "int8", 140.0)
    store_run(ME, "int8", 999.0, replay_of=mine)  # another run's numbers, replayed
    store_run(OTHER, "int8", 999.0)  # someone else's run
    other_params = make_lab()["configs"][1]["params"] | {"max_new_tokens": 5}
    store_run(ME, "int8", 999.0, params=other_params)  # not this row's configuration
    store_run(ME, "int8", 0.0, status=Run.Status.QUEUED)
    store_run(ME, "int8", 0.0, status=Run.Status.ERROR)
    row = rows(lab_table(lab, (ME,)))["int8"]
    assert row["runs"] == 1 and row["run_ids"] == [str(mine.id)]
    assert row["stats"]["decode_tokens_per_s"]["median"] == 140.0
    assert row["active"] == 1  # the queued run: "1 in progress"


def test_a_student_with_two_owners_sees_the_runs_of_both_and_no_owner_sees_nothing():
    lab = make_lab()
    store_run("s:before-login", "int8", 140.0)
    store_run(ME, "int8", 150.0)
    assert rows(lab_table(lab, (ME, "s:before-login")))["int8"]["runs"] == 2
    assert rows(lab_table(lab, ()))["int8"]["runs"] == 0


def test_a_run_stored_before_a_parameter_existed_matches_with_its_default():
    lab = make_lab()
    params = dict(lab["configs"][1]["params"])
    del params["projection"]  # as a run stored before the demo had this parameter keeps it
    store_run(ME, "int8", 140.0, params=params)
    assert rows(lab_table(lab, (ME,)))["int8"]["runs"] == 1


def test_runs_measured_on_different_setups_are_flagged():
    lab = make_lab()
    store_run(ME, "int8", 140.0, device="cpu")
    store_run(ME, "int8", 300.0, device="cuda")
    row = rows(lab_table(lab, (ME,)))["int8"]
    assert row["mixed_setup"] and row["device"] == "cuda"  # the newest run's
