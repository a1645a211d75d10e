"""Strict reading of what a DAG author writes, beside the tolerant reading of the service's documents.

Documents from the service keep a value this version does not know (``Open`` enum fields): the service
may add one any day. A value a person typed is another matter: ``pageFormat: "A7"`` is a typo or a
wish, and sending it would fail (or be ignored) after a load test ran for hours. So settings written in
a DAG go through :func:`require_known_values`, which refuses any value outside a closed set, naming the
allowed ones.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, get_args

from pydantic import BaseModel

__all__ = ["closed_set_of", "require_known_values"]


def _enum_in(annotation: Any) -> type[StrEnum] | None:
    """The StrEnum a field annotation (``Open[E] | None``, ``list[Open[E]]`` ...) is built on, if any."""
    if isinstance(annotation, type) and issubclass(annotation, StrEnum):
        return annotation
    for arg in get_args(annotation):
        found = _enum_in(arg)
        if found is not None:
            return found
    return None


def closed_set_of(model: type[BaseModel], field_name: str) -> type[StrEnum] | None:
    """The closed set (StrEnum) a field's values belong to, or ``None`` for a free-form field."""
    return _enum_in(model.model_fields[field_name].annotation)


def require_known_values(value: Any, what: str) -> None:
    """Raise ``ValueError`` when ``value`` (a model, or lists/dicts of them) holds a value outside the
    closed set of its field; the message names the setting, the value and the allowed values."""
    problems: list[str] = []
    _walk(value, what, problems)
    if problems:
        raise ValueError("; ".join(problems))


def _walk(value: Any, where: str, problems: list[str]) -> None:
    if isinstance(value, BaseModel):
        for name, info in type(value).model_fields.items():
            field_value = getattr(value, name)
            label = f"{where}.{info.alias or name}"
            enum = _enum_in(info.annotation)
            if enum is not None:
                _check(field_value, enum, label, problems)
            _walk(field_value, label, problems)
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            _walk(item, f"{where}[{position}]", problems)


def _check(value: Any, enum: type[StrEnum], label: str, problems: list[str]) -> None:
    values = value if isinstance(value, list | tuple) else [value]
    for item in values:
        if isinstance(item, str) and not isinstance(item, enum):
            allowed = ", ".join(member.value for member in enum)
            problems.append(f"{label} {item!r} is not one of the allowed values: {allowed}")
