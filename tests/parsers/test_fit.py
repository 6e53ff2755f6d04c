"""parsers/fit.py: whether a profile fits a log, judged from role counts and reassembly."""

from __future__ import annotations

from dpmstream.parsers.fit import Reassembled, judge, looks_like


def test_catch_all_shapes_are_matched_to_the_role_they_look_like():
    required = ("call", "returns", "token", "status", "slow_start")
    assert looks_like("DP092 - put req. from DN <DN> (<IDS>) from <HOST>", required) == ("call",)
    assert looks_like("return code N", required) == ("returns",)
    assert looks_like("DP098 - put token <UUID> files N", required) == ("token",)
    assert looks_like("status is SUCCESS", required) == ("status",)
    assert looks_like("selected <HOST>:<PATH> for <URL>", required) == ()


def test_a_missing_role_is_judged_only_in_enough_lines_of_the_daemon():
    roles = {"call": 150, "returns": 0}
    assert [f.role for f in judge(("call", "returns"), 300, roles, Reassembled())] == ["returns"]
    assert judge(("call", "returns"), 150, roles, Reassembled()) == []


def test_stray_returns_a_cut_start_explains_are_no_finding():
    roles = {"call": 1000, "returns": 1000}
    cut = Reassembled(stray_returns=40, returns_at_thread_start=40)
    assert judge(("call", "returns"), 3000, roles, cut) == []
    misfit = Reassembled(stray_returns=100, returns_at_thread_start=40)
    (finding,) = judge(("call", "returns"), 3000, roles, misfit)
    assert finding.message.startswith("stray returns: 60 of 1000 `returns` lines (6.0%)")
