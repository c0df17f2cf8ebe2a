"""The decision's records are NamedTuples (cheap to define at start-up), yet compare as records:
each equals only a record of its own kind, never a plain tuple, and is true without fields."""

from __future__ import annotations

from operator import eq, ne
from typing import Any

import pytest

from resolver.images import findings as im
from resolver.solve import findings as fd
from resolver.solve.memo import _copy


def _records() -> list[type[tuple[object, ...]]]:
    found = []
    for module in (fd, im):
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, tuple)
                and value.__module__ == module.__name__
                and value is not fd.Misfit
            ):
                found.append(value)
    return found


RECORDS = _records()


def _made(cls: Any) -> tuple[object, ...]:
    made: tuple[object, ...] = cls._make(range(len(cls._fields)))
    return made


def test_every_record_module_has_its_records() -> None:
    assert fd.CpuBuild in RECORDS and fd.DriverTooOld in RECORDS and im.ForwardCompat in RECORDS
    assert len(RECORDS) > 50


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_a_record_equals_its_own_kind_only(cls: type[tuple[object, ...]]) -> None:
    a, b = _made(cls), _made(cls)
    plain = tuple(a)
    assert eq(a, b) and not ne(a, b) and hash(a) == hash(b)
    # both operators, both ways round: a tuple's own == and != would say equal
    assert not eq(a, plain) and not eq(plain, a) and ne(a, plain) and ne(plain, a)
    assert a != object() and bool(a)
    assert {a: 1}.get(plain) is None and len({a, plain}) == 2


def test_kinds_with_the_same_values_differ() -> None:
    made = [_made(cls) for cls in RECORDS]
    assert len(set(made)) == len(made)  # zero-field records and same-arity ones included
    assert ne(fd.CpuBuild(), fd.CudaBuild()) and ne(fd.CpuAsAsked(), fd.JitOnly())
    assert not eq(fd.NoCompanion("vision", "2.5.0"), fd.VariantMiss("vision", "2.5.0"))
    assert not eq(fd.CcUnknown("A100"), fd.CcUnknownHint("A100"))
    assert not eq(fd.NoGpuModel(), ()) and ne((), fd.NoGpuModel())


def test_the_memo_copies_a_record_as_its_own_kind() -> None:
    old = fd.LastBranch("A100", "Ampere", 570, None)
    new = _copy(old, last=575)
    assert type(new) is fd.LastBranch and new == fd.LastBranch("A100", "Ampere", 575, None)
    assert old.last == 570
