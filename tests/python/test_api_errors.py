"""Bad input through the Python API raises the documented exception, with a
message that says what and where.

peakmem.analyze documents: TypeError for an object that is not a trace,
peakmem.TraceError (a ValueError carrying file, line, column, message and
line_text) for malformed trace text or JSON, FileNotFoundError for a missing
path and ValueError for an unknown memory model. Columns are 1-based.
"""

from __future__ import annotations

import pytest

import peakmem
import peakmem.thunder

GOOD = 'def computation(x):\n  # x: "cpu f32[4]"\n  return x\n'


# ---------------------------------------------------------------------------
# Not a trace


@pytest.mark.parametrize("obj", [42, object(), None, [GOOD], {"trace": GOOD}])
def test_non_trace_objects_raise_type_error(obj):
    with pytest.raises(TypeError, match=f"expects a Thunder TraceCtx, trace text or a path, got {type(obj).__name__}"):
        peakmem.analyze(obj, memory_model="thunder")
    with pytest.raises(TypeError):
        peakmem.thunder.get_alloc_memory(obj)


def test_bytes_are_not_text():
    with pytest.raises(TypeError, match="not bytes"):
        peakmem.analyze(GOOD.encode(), memory_model="thunder")


def test_to_json_export_wants_a_trace_ctx():
    with pytest.raises(TypeError, match="expected a Thunder TraceCtx, got str"):
        peakmem.to_json_export(GOOD)


# ---------------------------------------------------------------------------
# Corrupt files


def test_corrupt_text_file(tmp_path):
    path = tmp_path / "bad.trace"
    path.write_text('def computation(x):\n  # x: "cpu f32[4]"\n  t0 = torch.mul(x, $)  # t0: "cpu f32[4]"\n  return t0\n')
    with pytest.raises(peakmem.TraceError) as info:
        peakmem.analyze(path, memory_model="thunder")
    err = info.value
    assert isinstance(err, ValueError)
    # Line 3 is "  t0 = torch.mul(x, $)...": two spaces and the 18 characters
    # of "t0 = torch.mul(x, " come before the '$', so it is column 21.
    assert (err.file, err.line, err.column) == (str(path), 3, 21)
    assert err.line_text == '  t0 = torch.mul(x, $)  # t0: "cpu f32[4]"'
    assert "'$'" in err.message
    # str(err): "file:line:col: message", the offending line, a caret under column 21.
    assert str(err) == f"{path}:3:21: {err.message}\n{err.line_text}\n{' ' * 20}^"


def test_unknown_dtype_in_a_type_comment(tmp_path):
    path = tmp_path / "dtype.trace"
    path.write_text('def computation(x):\n  # x: "cpu f99[4]"\n  return x\n')
    with pytest.raises(peakmem.TraceError) as info:
        peakmem.analyze(str(path), memory_model="thunder")
    # '  # x: "cpu ' is 12 characters: the dtype starts at column 13.
    assert (info.value.line, info.value.column) == (2, 13)
    assert "f99" in info.value.message


def test_text_that_is_not_a_trace(tmp_path):
    path = tmp_path / "prose.trace"
    path.write_text("hello world\n")
    with pytest.raises(peakmem.TraceError) as info:
        peakmem.analyze(path, memory_model="thunder")
    assert (info.value.file, info.value.line, info.value.column) == (str(path), 1, 1)
    assert "def" in info.value.message


def test_corrupt_json_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "peakmem.trace", "version": 1, "statements": [\n{"kind": 3}\n]}\n')
    with pytest.raises(peakmem.TraceError) as info:
        peakmem.analyze(path, memory_model="thunder")
    err = info.value
    assert isinstance(err, ValueError)
    # Line 2 is '{"kind": 3}': the value 3 is the 10th character.
    assert (err.file, err.line, err.column) == (str(path), 2, 10)
    assert err.line_text == '{"kind": 3}'
    assert "kind" in err.message


def test_truncated_json_file(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text('{"format": "peakmem.trace", "version": 1, "statements": [\n{"kind": "call",\n')
    with pytest.raises(peakmem.TraceError) as info:
        peakmem.analyze(path, memory_model="thunder")
    assert info.value.file == str(path)
    assert info.value.line >= 1 and info.value.column >= 1


def test_corrupt_text_given_as_a_string():
    with pytest.raises(peakmem.TraceError) as info:
        peakmem.analyze('def computation(x):\n  return $\n', memory_model="thunder")
    # "  return " is 9 characters: '$' is column 10 of line 2.
    assert (info.value.line, info.value.column) == (2, 10)


# ---------------------------------------------------------------------------
# Missing paths, unknown models


def test_missing_path(tmp_path):
    missing = tmp_path / "nope.trace"
    with pytest.raises(FileNotFoundError, match="nope.trace"):
        peakmem.analyze(missing, memory_model="thunder")
    with pytest.raises(FileNotFoundError, match="nope.trace"):
        peakmem.analyze(str(missing), memory_model="thunder")
    with pytest.raises(FileNotFoundError):
        peakmem.thunder.get_alloc_memory(str(missing))


def test_unknown_model(tmp_path):
    with pytest.raises(ValueError, match="unknown model 'nope'") as info:
        peakmem.analyze(GOOD, memory_model="nope")
    assert not isinstance(info.value, peakmem.TraceError)
    # The message lists the models there are.
    for name in peakmem.available_models():
        assert name in str(info.value)
    path = tmp_path / "good.trace"
    path.write_text(GOOD)
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        peakmem.analyze(path, memory_model="nope")


def test_good_input_still_works():
    # The controls. Thunder's estimator takes its running maximum only after
    # a statement it does not skip (return and unpacks are skipped), so a
    # trace that only returns its f32[4] argument has peak 0 and 16 bytes
    # held; peakmem's thunder model reproduces that.
    report = peakmem.analyze(GOOD, memory_model="thunder")
    assert (report.peak_bytes, report.final_bytes) == (0, 16)
    # x (16) + t0 = x * x (16): peak 32, final 32.
    text = 'def computation(x):\n  # x: "cpu f32[4]"\n  t0 = torch.mul(x, x)  # t0: "cpu f32[4]"\n  return t0\n'
    report = peakmem.analyze(text, memory_model="thunder")
    assert (report.peak_bytes, report.final_bytes) == (32, 32)


def test_a_step_spec_with_an_unknown_key_is_refused():
    # The spec's keys are read in C++; a misspelt one is not silently defaulted.
    from peakmem import _core

    with pytest.raises(ValueError, match="unknown key 'cpu_threads'"):
        _core.simulate_step("", "", spec={"cpu_threads": 1})


def test_a_nested_unknown_step_spec_key_is_named_with_its_path():
    # The spec is the step file's schema without the traces (docs/step-file.md);
    # a misspelt key inside an object is named with where it is.
    from peakmem import _core

    with pytest.raises(ValueError, match=r"the step spec: unknown key 'forward\.savd'"):
        _core.simulate_step("", "", spec={"forward": {"savd": []}})
