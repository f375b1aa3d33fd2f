"""One source for each record layout: the records table (mlx2onnx/capture/records.py).

Handlers decode ``arguments`` through it (``rec.args``), the interpreter and ``inspect
--records`` too; these tests keep the handlers' docstrings and the registry in step with
it, so a layout written in one place cannot disagree with another."""

from __future__ import annotations

import re

import pytest

from mlx2onnx.capture import records
from mlx2onnx.translate import registry


def _handlers():
    by_function: dict = {}
    for name, fn in registry.handlers().items():
        by_function.setdefault(fn, []).append(name)
    for name, fn in registry.complex_handlers().items():
        by_function.setdefault(fn, []).append(name)
    return sorted(by_function.items(), key=lambda kv: (kv[0].__module__, kv[0].__name__))


def documented_layouts(doc: str) -> tuple[list[str] | None, dict[str, list[str]]]:
    """The ``arguments [a, b: Type]`` list of a docstring, and ``Name: [..]`` lists for
    the other primitives one handler serves."""
    text = " ".join(doc.split())

    def names(inside: str) -> list[str]:
        return [part.split(":")[0].strip() for part in inside.split(",") if part.strip()]

    found = re.search(r"arguments \[([^\]]*)\]", text)
    others = {m.group(1): names(m.group(2)) for m in re.finditer(r"\b([A-Z][A-Za-z]+): \[([^\]]*)\]", text)}
    return (names(found.group(1)) if found else None), others


@pytest.mark.parametrize("fn, names", _handlers(), ids=lambda v: getattr(v, "__name__", None) or ",".join(v))
def test_handler_docstrings_name_the_records_fields(fn, names):
    listed, others = documented_layouts(fn.__doc__ or "")
    for name in names:
        want = list(records.FIELDS[name])
        got = others.get(name, listed)
        assert got == want, (
            f"{fn.__module__}.{fn.__name__} documents {name}'s arguments as {got}; records.FIELDS says {want}"
        )


@pytest.mark.parametrize("fn, names", _handlers(), ids=lambda v: getattr(v, "__name__", None) or ",".join(v))
def test_enum_codes_are_written_only_in_the_records_table(fn, names):
    assert not re.search(r"\b[A-Za-z]+=\d\b", fn.__doc__ or ""), (
        f"{fn.__module__}.{fn.__name__} spells enum codes in its docstring: name the IntEnum of records instead"
    )


def test_every_registered_primitive_has_a_records_row():
    registered = set(registry.handlers()) | set(registry.refusals()) | set(registry.complex_handlers())
    assert not sorted(registered - set(records.FIELDS))


def test_records_decode_to_named_tuples_with_enums():
    args = records.decode("Scatter", (4, (0,)))
    assert args.reduce is records.ScatterReduce.None_ and str(args.reduce) == "None" and args.axes == (0,)
    kind, axes = records.decode("Reduce", [2, [1]])
    assert kind == records.ReduceType.Sum == 2 and f"{kind}" == "Sum" and axes == [1]
    assert records.decode("FFT", [[1], False, False]).odd_out is None  # odd_out is new in MLX 0.32.4
    assert records.decode("Frobnicate", [7]).arg0 == 7
