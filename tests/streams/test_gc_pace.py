"""The garbage-collector's pace of a long pass (the worker, report): relaxed while it runs,
restored after; and what report freezes, thawed when it is done."""

import gc
import weakref

import pytest

from dpmstream.streams.gc_pace import relaxed_gc, thawed_after


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_the_youngest_generation_is_collected_less_often_inside_and_as_before_after(thresholds):
    gc.set_threshold(700, 10, 10)
    with relaxed_gc(50_000):
        assert gc.get_threshold() == (50_000, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_pace_already_slower_is_kept(thresholds):
    gc.set_threshold(100_000, 5, 5)
    with relaxed_gc(50_000):
        assert gc.get_threshold() == (100_000, 5, 5)


def test_the_thresholds_are_restored_when_the_block_fails(thresholds):
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError):
        with relaxed_gc(50_000):
            raise RuntimeError("worker failed")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_cycle_is_still_collected_by_itself_once_enough_objects_were_allocated(thresholds):
    class Node:
        pass

    gc.set_threshold(700, 10, 10)
    with relaxed_gc(5_000):
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        kept = [[] for _ in range(6_000)]   # past the gen0 threshold: a collection runs
        assert gone() is None
        del kept


@pytest.fixture
def nothing_frozen():
    gc.unfreeze()   # whatever an earlier test left frozen goes back to the collections
    yield
    gc.unfreeze()


def test_what_a_block_froze_is_thawed_at_its_end(nothing_frozen):
    kept = [[] for _ in range(100)]
    with thawed_after():
        gc.freeze()
        assert gc.get_freeze_count() > len(kept)
    assert gc.get_freeze_count() == 0


def test_what_a_block_froze_is_thawed_when_it_fails(nothing_frozen):
    with pytest.raises(RuntimeError):
        with thawed_after():
            gc.freeze()
            raise RuntimeError("the page could not be written")
    assert gc.get_freeze_count() == 0


def test_what_a_caller_froze_before_the_block_stays_frozen(nothing_frozen):
    gc.freeze()
    before = gc.get_freeze_count()
    with thawed_after():
        gc.freeze()
    assert gc.get_freeze_count() >= before > 0
