"""disttrain's exceptions: one class per C++ ``disttrain::errc`` category.

Every error raised by the C++ core is an instance of :class:`Error` (or a
subclass) carrying ``errc`` (the category name, e.g. ``"invalid_argument"``),
``where`` (the field path, module/stage or peer concerned, e.g.
``"cluster.num_gpus"``) and ``message`` (the text without the prefix).
``str(e)`` is the C++ ``what()``: ``disttrain: <errc> at <where>: <message>``.
"""
from __future__ import annotations

__all__ = [
    "Error", "InvalidArgument", "ParseError", "Infeasible", "ScheduleError", "CommError",
    "Timeout", "Unsupported", "Internal", "error_class",
]


class Error(Exception):
    """Base class of every disttrain error."""

    errc: str
    where: str
    message: str

    def __init__(self, what: str, errc: str = "internal", where: str = "", message: str | None = None):
        super().__init__(what)
        self.errc = errc
        self.where = where
        self.message = what if message is None else message

    def __reduce__(self):  # picklable (multiprocessing, torch.distributed)
        return (type(self), (str(self), self.errc, self.where, self.message))


class InvalidArgument(Error, ValueError):
    """A value is out of its allowed range or inconsistent (``invalid_argument``)."""


class ParseError(Error, ValueError):
    """Malformed JSON, an unknown key, a missing or mistyped field (``parse_error``)."""


class Infeasible(Error):
    """A request cannot be met: memory, GPU count, ... (``infeasible``)."""


class ScheduleError(Error):
    """A schedule is malformed or deadlocks (``schedule_error``)."""


class CommError(Error):
    """A transfer failed or a peer sent something unexpected (``comm_error``)."""


class Timeout(Error, TimeoutError):
    """A wait exceeded its deadline (``timeout``)."""


class Unsupported(Error, NotImplementedError):
    """A feature not compiled in or not available here (``unsupported``)."""


class Internal(Error):
    """A broken invariant inside disttrain, a bug to report (``internal``)."""


_BY_ERRC = {
    "invalid_argument": InvalidArgument,
    "parse_error": ParseError,
    "infeasible": Infeasible,
    "schedule_error": ScheduleError,
    "comm_error": CommError,
    "timeout": Timeout,
    "unsupported": Unsupported,
    "internal": Internal,
}


def error_class(errc: str) -> type[Error]:
    """The exception class of an errc name (``Error`` for an unknown one)."""
    return _BY_ERRC.get(errc, Error)
