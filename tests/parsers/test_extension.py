"""parsers/extension.py: the one way a module asks for a name of the compiled extension.

`compiled(name)` is the extension's own object where it is built, and None where it is
not built, was built without the name, or DPMSTREAM_PURE_PYTHON is set; the environment is
read at each call, so a module that asks at each construction follows a test's setenv.
A name asked `required` is an error where missing under DPMSTREAM_REQUIRE_NATIVE."""

from __future__ import annotations

import os

import pytest

from dpmstream.parsers import extension

try:
    from dpmstream.parsers import _native
except ImportError:  # not built
    _native = None

needs_native = pytest.mark.skipif(
    _native is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the compiled extension is not built (native/)")


@needs_native
def test_a_name_of_the_built_extension_is_the_extensions_own_object(monkeypatch):
    monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    for name in ("FastLines", "LineBlock", "CsvBlocks", "record_csv_line", "run_model"):
        assert extension.compiled(name) is getattr(_native, name), name


@needs_native
def test_pure_python_turns_every_name_off_from_the_moment_it_is_set(monkeypatch):
    monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    assert extension.compiled("FastLines") is not None
    monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    assert extension.compiled("FastLines") is None
    assert extension.compiled("record_csv_line") is None
    monkeypatch.delenv("DPMSTREAM_PURE_PYTHON")
    assert extension.compiled("FastLines") is _native.FastLines


def test_a_name_the_build_does_not_have_is_none(monkeypatch):
    """An extension built before a name was added to native/ leaves that name to Python."""
    monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    assert extension.compiled("NoSuchNameInTheExtension") is None


def test_without_the_extension_every_name_is_none(monkeypatch):
    monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    monkeypatch.setattr(extension, "_native", None)   # as where no Rust toolchain built it
    assert extension.compiled("FastLines") is None
    assert extension.compiled("record_csv_line") is None


def test_a_required_name_missing_is_an_error_when_the_native_build_is_required(monkeypatch):
    """A module whose Python fallback would hide a failed build asks its name `required`:
    under DPMSTREAM_REQUIRE_NATIVE (make check, where cargo is) missing is an error that
    names it; without, None as for any name."""
    monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    monkeypatch.setattr(extension, "_native", None)   # as where no Rust toolchain built it
    monkeypatch.setenv("DPMSTREAM_REQUIRE_NATIVE", "1")
    with pytest.raises(RuntimeError, match=r"the compiled model \(dpmstream.parsers._native.run_model\)"):
        extension.compiled("run_model", required="the compiled model")
    assert extension.compiled("run_model") is None   # not asked as required: the fallback
    monkeypatch.delenv("DPMSTREAM_REQUIRE_NATIVE")
    assert extension.compiled("run_model", required="the compiled model") is None


def test_a_required_name_turned_off_is_none_even_when_the_native_build_is_required(monkeypatch):
    monkeypatch.setenv("DPMSTREAM_REQUIRE_NATIVE", "1")
    monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    assert extension.compiled("NoSuchNameInTheExtension", required="a name") is None
    assert extension.compiled("FastLines", required="the line parser") is None


@needs_native
def test_a_required_name_the_build_has_is_the_extensions_own_object(monkeypatch):
    monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    monkeypatch.setenv("DPMSTREAM_REQUIRE_NATIVE", "1")
    assert extension.compiled("run_model", required="the compiled model") is _native.run_model


def _reference_max_overlap(pairs):
    """A stand-in reference that says it answered, so a test sees who did."""
    return ("reference", len(pairs))


@needs_native
def test_compiled_else_answers_by_the_extension_and_gives_the_reference_what_it_refuses(monkeypatch):
    """The compiled function answers what it can read; numbers it cannot read exactly
    (an int beyond 64 bits: OverflowError; a float where it takes ints: TypeError) go to
    the reference, so no input is lost to the compiled path's narrower types."""
    monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    either = extension.compiled_else("max_overlap", _reference_max_overlap)
    assert either([(0, 10), (5, 15)]) == 2 == _native.max_overlap([(0, 10), (5, 15)])
    assert either([(0, 2 ** 70)]) == ("reference", 1)
    assert either([(0.5, 10)]) == ("reference", 1)


def test_compiled_else_is_the_reference_itself_where_the_name_is_not_compiled(monkeypatch):
    monkeypatch.delenv("DPMSTREAM_PURE_PYTHON", raising=False)
    assert extension.compiled_else("NoSuchNameInTheExtension", _reference_max_overlap) \
        is _reference_max_overlap
    monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    assert extension.compiled_else("max_overlap", _reference_max_overlap) is _reference_max_overlap
