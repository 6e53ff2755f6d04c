"""parsers/shapes.py: a message with its variable parts masked, so unmatched lines group."""

from __future__ import annotations

import pytest

from dpmstream.parsers.shapes import shape


@pytest.mark.parametrize("text, expected", [
    ("returns 17", "returns N"),
    ("at 0x7f3a", "at N"),
    ("6d4c2a8e-3f5b-4e0c-9a71-2b8f0c1d9e47 done", "<UUID> done"),
    ("copy to srm://head.cern.ch:8446/dpm/x/f1 now", "copy to <URL> now"),
    ("[137.138.40.11] refused", "[<IP>] refused"),
    ("from lxfsra01.cern.ch", "from <HOST>"),
    ("mkdir /grid/voce/dir1  777 22", "mkdir <PATH>  N N"),
    ("by /DC=ch/DC=cern/OU=Users/CN=Some One", "by <DN>"),
    ("uid (1001,1001,2002)", "uid (<IDS>)"),
])
def test_each_kind_of_variable_part_has_its_mask(text, expected):
    assert shape(text) == expected


def test_a_request_line_shapes_its_dn_ids_and_host():
    text = "DP092 - put request by /DC=ch/DC=cern/CN=Ann Smith (1001,1001) from ui.cern.ch"
    assert shape(text) == "DP092 - put request by <DN> (<IDS>) from <HOST>"


def test_the_dn_ends_before_the_callers_ids():
    # A CN with a number in brackets keeps it out of the DN mask: it is masked as a number.
    text = "by /DC=ch/CN=Some One (12345) (1001,1001) from h.cern.ch"
    assert shape(text) == "by <DN> (N) (<IDS>) from <HOST>"


def test_an_url_is_masked_whole_not_as_host_and_path():
    assert shape("srm://a.b.org/x/y") == "<URL>"


def test_a_path_after_a_colon_is_masked_but_the_disk_name_is_kept():
    assert shape("selected disk01:/srv/dpm/01 for x") == "selected disk01:<PATH> for x"


def test_lines_that_differ_only_in_their_variables_share_a_shape():
    a = "NS098 - mkdir /grid/a/b 777 22 from ui1.cesnet.cz at 10.0.0.1"
    b = "NS098 - mkdir /home/x 755 0 from lxplus.cern.ch at 192.168.1.200"
    assert shape(a) == shape(b) == "NS098 - mkdir <PATH> N N from <HOST> at <IP>"


def test_words_with_digits_are_not_numbers():
    assert shape("DP002 - netread error on disk01") == "DP002 - netread error on disk01"


def test_a_slash_after_a_word_or_an_angle_bracket_is_not_a_path():
    assert shape("and/or </b> /x/y") == "and/or </b> <PATH>"


def test_a_dn_at_the_end_of_the_text_runs_to_the_end():
    assert shape("by /DC=ch/CN=Some One 7") == "by <DN>"


def test_the_shape_is_cut_at_the_limit():
    assert shape("a" * 300) == "a" * 200
    assert shape("word " * 10, limit=7) == "word wo"


def test_a_long_line_is_cut_before_masking_so_its_shape_stays_bounded():
    text = "returns 1 " + "x" * 10_000 + " 123"
    assert shape(text, limit=10) == "returns N "


def test_the_cut_happens_before_masking():
    # With limit 10 only 40 characters are masked: the DN then reaches the end of the
    # text, and the ids after it were never seen.
    assert shape("/DC=a/CN=" + "b" * 100 + " (1,2)", limit=10) == "<DN>"


def test_text_without_variables_is_unchanged():
    assert shape("request accepted") == "request accepted"
    assert shape("") == ""
