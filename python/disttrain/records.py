"""The typed results of disttrain: :class:`Topology`, :class:`SampleMap`
and :class:`Program`, frozen dataclasses (fields cannot be reassigned: use
``dataclasses.replace``) that are also read-only mappings, so code written
against the dicts of earlier releases (``t["ranks"]``, ``dict(m,
offset=...)``, ``**p``) keeps working beside attribute access
(``t.ranks``). ``to_dict()`` gives a plain dict, ``from_dict(d)`` checks
the keys (an unknown or missing one raises :class:`disttrain.ParseError`
naming it) and builds the record.

The field lists are those of the C++ side's outputs (the topology's JSON
view, the sample map's columns, the bound program's columns); tests check
that a record built from each output has every key the output has.
"""
from __future__ import annotations

import dataclasses as _dc
from collections.abc import Mapping
from typing import Any, ClassVar, Iterator, Optional

import numpy as _np

from .errors import ParseError

__all__ = ["Topology", "SampleMap", "Program"]


class _Record(Mapping):
    """A read-only mapping over a dataclass's fields (see the module comment).
    ``_key_of``: the key of a field whose attribute name differs (a key that
    would shadow a builtin as a constructor parameter: ``id``, ``bytes``)."""

    _key_of: ClassVar[dict[str, str]] = {}

    def __getitem__(self, key: str) -> Any:
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, self._field_of(key))

    @classmethod
    def _field_of(cls, key: str) -> str:
        for f, k in cls._key_of.items():
            if k == key:
                return f
        return key

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __eq__(self, other: object) -> bool:
        """Equal to a record or mapping with the same keys and values
        (arrays compared element by element)."""
        if not isinstance(other, Mapping) or set(other) != set(self._names()):
            return False
        return all(_equal(self[k], other[k]) for k in self._names())

    __hash__ = None  # type: ignore[assignment]  # holds lists and arrays

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self._names())})"

    def _names(self) -> tuple[str, ...]:
        """The keys: every field's, but an optional one only where it is set."""
        return tuple(self._key_of.get(f.name, f.name)
                     for f in _dc.fields(self)  # type: ignore[arg-type]
                     if f.default is _dc.MISSING or getattr(self, f.name) is not None)

    def to_dict(self) -> dict[str, Any]:
        """The record as a plain dict (the values themselves, not copies)."""
        return {k: self[k] for k in self._names()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        """The record of ``d``; raises :class:`disttrain.ParseError` naming an
        unknown key or a missing one (optional fields may be left out)."""
        name = cls.__name__
        if not isinstance(d, Mapping):
            raise ParseError(f"disttrain: parse_error at {name}: expected a mapping, got "
                             f"{type(d).__name__}", "parse_error", name)
        fields = {cls._key_of.get(f.name, f.name): f
                  for f in _dc.fields(cls)}  # type: ignore[arg-type]
        extra = sorted(set(d) - set(fields))
        if extra:
            raise ParseError(f"disttrain: parse_error at {name}.{extra[0]}: unknown key "
                             f"(keys: {', '.join(fields)})", "parse_error", f"{name}.{extra[0]}")
        for k, f in fields.items():
            if k not in d and f.default is _dc.MISSING:
                raise ParseError(f"disttrain: parse_error at {name}.{k}: missing",
                                 "parse_error", f"{name}.{k}")
        return cls(**{f.name: d[k] for k, f in fields.items() if k in d})


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, _np.ndarray) or isinstance(b, _np.ndarray):
        return _np.array_equal(_np.asarray(a), _np.asarray(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    return bool(a == b)


@_dc.dataclass(frozen=True, eq=False, repr=False)
class Topology(_Record):
    """The pipeline's one topology (:func:`disttrain.topology`): ``modules``
    (per module: ``name``, ``role``, ``tp``, ``pp``, ``dp``, ``trainable``,
    ``colocated``, and ``chunks`` / ``layers`` where set), ``world_size``,
    ``backbone`` (module index), ``chain`` (``[module, stage]`` per chain
    stage), ``path`` (``[chain stage, chunk]`` per virtual stage),
    ``owning_modules``, ``ranks`` (per global rank: ``module``, ``stage``,
    ``replica``, ``tp_rank``, ``chain_stage``) and ``describe``."""
    modules: list
    world_size: int
    backbone: int
    chain: list
    path: list
    owning_modules: list
    ranks: list
    describe: str


@_dc.dataclass(frozen=True, eq=False, repr=False)
class SampleMap(_Record):
    """A batch's sample map (:func:`disttrain.reorder`,
    :meth:`disttrain.Reorderer.assign`): per sample (rows in ``id`` order of
    the batch) its ``id``, ``microbatch``, ``replica`` and ``offset`` per
    module (``(n, modules)`` arrays), with ``load``, ``imbalance``,
    ``iteration_time``, ``microbatches`` and ``dp``. The key ``"id"`` is the
    attribute ``ids``."""
    _key_of: ClassVar[dict[str, str]] = {"ids": "id"}
    ids: _np.ndarray
    microbatch: _np.ndarray
    replica: _np.ndarray
    offset: _np.ndarray
    load: list
    imbalance: _np.ndarray
    iteration_time: float
    microbatches: int
    dp: list


@_dc.dataclass(frozen=True, eq=False, repr=False)
class Program(_Record):
    """One rank's bound program (:func:`disttrain.bind_rank`): the rank's
    facts and one NumPy column per op field (see ``bind_rank``). The key
    ``"bytes"`` is the attribute ``nbytes``."""
    _key_of: ClassVar[dict[str, str]] = {"nbytes": "bytes"}
    rank: int
    chain_stage: int
    fields: int
    dp_group: list
    virtual_stages: list
    input_elements: _np.ndarray
    output_elements: _np.ndarray
    kind: _np.ndarray
    stage: _np.ndarray
    chunk: _np.ndarray
    microbatch: _np.ndarray
    peer: _np.ndarray
    bucket: _np.ndarray
    tag: _np.ndarray
    link: _np.ndarray
    phase: _np.ndarray
    message: _np.ndarray
    nbytes: _np.ndarray
    elements: _np.ndarray
    stamp: _np.ndarray
    batch: _np.ndarray
    blocks: list
    parts: list
    index: Optional[list] = None
