"""One parametrised parity test over every case table in tests/support/cases/."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from tests.support import cases
from tests.support.harness import case_params, check_case


def all_case_modules():
    return [
        importlib.import_module(f"{cases.__name__}.{info.name}")
        for info in sorted(pkgutil.iter_modules(cases.__path__), key=lambda i: i.name)
    ]


def all_cases():
    found = []
    for module in all_case_modules():
        found.extend(getattr(module, "CASES", []))
    return found


CASES = all_cases()


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize("case, dtype, opset", case_params(CASES))
def test_parity(case, dtype, opset):
    check_case(case, dtype, opset)
