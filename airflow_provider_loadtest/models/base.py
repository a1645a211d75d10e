"""Base classes shared by every document model (spec 2.2: JSON objects, ``@type`` discriminators).

What every model promises, once, here:

* python attributes are snake_case, JSON keys camelCase (``alias_generator=to_camel``);
* unknown fields are kept and written back (``extra="allow"``), numbers keep int or float, explicit
  nulls stay null (only fields that were set are written);
* a known polymorphic variant always writes its ``@type`` (the service needs it to pick the class).

Key order is not kept: JSON objects are unordered for the service (a Jackson server reads ``@type``
wherever it stands), no call of this package writes a document it read back to the service, and no
user-visible promise depends on it. (Up to 0.1.0 a document remembered its input to restore its key
order on writing; that cost reads their share and two hundred lines for nobody.)

Reading costs what pydantic's Rust core costs and nothing more: no Python code runs per object while a
document is validated (no wrap validator, no private attribute, no ``model_post_init``), and the
polymorphic unions use pydantic's native ``@type`` discriminator. Each polymorphic family is one
union, tried left to right::

    Annotated[A | B | ..., Field(discriminator="kind"), Tag(KNOWN_TAG)]
    | Annotated[UnknownFamily, Tag(UNKNOWN_TAG)]

A known ``@type`` is routed in Rust; an unknown or missing one fails the first branch at once and is
kept by the family's :class:`UnknownModel`, which refuses the family's known types (``variant_tags``),
so that a known ``@type`` whose fields do not match still fails.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any, ClassVar, Generic, Self, TypeAlias, TypeVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "KNOWN_TAG",
    "TYPE_KEY",
    "UNKNOWN_TAG",
    "ApiAdapter",
    "ApiModel",
    "Bool",
    "HeldWarnings",
    "Int",
    "KnownTypeMismatch",
    "Number",
    "TypedModel",
    "UnknownModel",
    "describe_errors",
    "variant_tags",
]

logger = logging.getLogger("airflow_provider_loadtest.models")

#: JSON key of the discriminator of polymorphic objects.
TYPE_KEY = "@type"
#: Label of the branch of a polymorphic union that holds the known variants (tried first, natively).
KNOWN_TAG = "__known__"
#: Label of the branch under which each polymorphic union keeps an unknown (or missing) ``@type``.
UNKNOWN_TAG = "__unknown__"

#: A JSON "number": ``int | float`` in smart mode keeps ``1`` an int and ``0.5`` / ``1.0`` floats. Strict,
#: so that a ``true`` is not read as ``1`` and then written back as a number (no lossless round trip).
Number: TypeAlias = StrictInt | StrictFloat
#: A JSON integer, strict for the same reason.
Int: TypeAlias = StrictInt
#: A JSON boolean, strict for the same reason (a lax ``bool`` reads ``"yes"`` or ``1`` and writes ``true``).
Bool: TypeAlias = StrictBool

T = TypeVar("T")


def _kind_default(cls: type[BaseModel]) -> str:
    default = cls.model_fields["kind"].default
    if not isinstance(default, str):
        raise TypeError(f"{cls.__name__}.kind has no string default")
    return default


# --- the models ---------------------------------------------------------------------------------


class ApiModel(BaseModel):
    """Base of every document model: camelCase JSON, extras kept, only what was set written back."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="allow",
    )

    def to_api(self) -> dict[str, Any]:
        """The JSON-ready dict to send to the service: camelCase keys, only the fields that were set
        (unknown ones included), and the ``@type`` of every known variant."""
        dumped = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        _write_types(self, dumped)
        return dumped

    @classmethod
    def from_api(cls, data: Any) -> Self:
        """Validate a document received from the service (same as ``model_validate``)."""
        return cls.model_validate(data)

    @classmethod
    def read_json(cls, json_data: str | bytes | bytearray) -> Self:
        """Read an answer straight from its bytes (``model_validate_json``, at the cost of pydantic's
        core alone)."""
        model: Self = cls.__pydantic_validator__.validate_json(json_data)
        return model


def _write_types(model: ApiModel, dumped: dict[str, Any]) -> None:
    """Give every known variant in ``dumped`` (``model``'s dump, changed in place) its ``@type``: one
    built in Python, or read from a document that left it out, has not *set* its ``kind``. A pass
    over the dump, not a serializer: models carry no Python hook (reads and dumps stay in Rust)."""
    if isinstance(model, TypedModel):
        dumped.setdefault(TYPE_KEY, model.kind)  # type: ignore[attr-defined]  # every variant's Literal
    for name, info in type(model).model_fields.items():
        out = dumped.get(info.alias or name)
        if out is not None:
            _write_types_in(model.__dict__.get(name), out)


def _write_types_in(value: Any, dumped: Any) -> None:
    if isinstance(value, ApiModel) and type(dumped) is dict:
        _write_types(value, dumped)
    elif isinstance(value, list) and type(dumped) is list and len(value) == len(dumped):
        for item, out in zip(value, dumped, strict=True):
            _write_types_in(item, out)


class TypedModel(ApiModel):
    """A known polymorphic variant: ``kind`` (JSON ``@type``) is a ``Literal`` and is always written.

    Subclasses declare ``kind: Literal["Name"] = Field("Name", alias="@type")``.
    """


class KnownTypeMismatch(ValueError):
    """An object whose ``@type`` is a known variant's but whose fields do not match it.

    Raised by the unknown branch of a union so that a broken known document fails (tolerance is for
    unknown types, not for broken known ones); :func:`describe_errors` leaves it out.
    """


class UnknownModel(ApiModel):
    """Opaque stand-in for a variant whose ``@type`` this version does not know; kept verbatim."""

    kind: str | None = Field(default=None, alias=TYPE_KEY)
    family: ClassVar[str] = "object"
    #: The ``@type`` values of the family's known variants (set with :func:`variant_tags`).
    known_types: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _refuse_known(cls, data: Any) -> Any:
        # Runs only when the known branch of the union did not match: rare, so Python here costs nothing.
        if isinstance(data, dict):
            tag = data.get(TYPE_KEY, data.get("kind"))
            if isinstance(tag, str) and tag in cls.known_types:
                raise KnownTypeMismatch(f"{tag} is a known {cls.family} @type")
        return data

    @model_validator(mode="after")
    def _warn_unknown(self) -> Self:
        warning = (
            "Unknown %s @type %r: kept as an opaque %s and written back unchanged",
            self.family,
            self.kind,
            type(self).__name__,
        )
        held = _HELD_WARNINGS.get()
        if held is None:
            logger.warning(*warning)
        else:
            held.append(warning)
        return self


#: Unknown-type warnings held back while a reading may still be given up (see :class:`HeldWarnings`).
_HELD_WARNINGS: ContextVar[list[tuple[Any, ...]] | None] = ContextVar("_HELD_WARNINGS", default=None)


class HeldWarnings:
    """Hold back the unknown-``@type`` warnings of a reading that may be given up and done again.

    A list answer read in one pass is read again template by template when one template does not match;
    without this, the warnings of the templates read in the first pass would be logged twice. Logged
    when the block ends without an error, dropped when it raises (the reading that follows logs them).
    Each is said once per reading: a workspace's 1,000 templates holding one new item type is one line,
    not 1,000 (the warning names the type, not the template).
    """

    def __enter__(self) -> None:
        self._held: list[tuple[Any, ...]] = []
        self._token = _HELD_WARNINGS.set(self._held)

    def __exit__(self, exc_type: object, *_: object) -> None:
        _HELD_WARNINGS.reset(self._token)
        if exc_type is None:
            for warning in dict.fromkeys(self._held):
                logger.warning(*warning)


def variant_tags(union: Any) -> frozenset[str]:
    """The ``@type`` of every :class:`TypedModel` in a union type (for ``UnknownModel.known_types``)."""
    found: set[str] = set()
    stack = [union]
    while stack:
        kind = stack.pop()
        if isinstance(kind, type) and issubclass(kind, TypedModel):
            found.add(_kind_default(kind))
        else:  # a union, an Annotated (its metadata has no arguments), a Literal's strings: none
            stack.extend(get_args(kind))
    return frozenset(found)


# --- adapters of non-model types (unions, lists) ---------------------------------------------------


class ApiAdapter(Generic[T]):
    """A ``TypeAdapter`` of a union or a list of models, with the models' ``read_json``.

    pydantic's ``TypeAdapter`` cannot be subclassed; this wraps one. Any other ``TypeAdapter`` method
    is reached through :attr:`adapter`.
    """

    def __init__(self, kind: Any) -> None:
        self.adapter: TypeAdapter[T] = TypeAdapter(kind)

    def validate_python(self, obj: Any, /, **kwargs: Any) -> T:
        return self.adapter.validate_python(obj, **kwargs)

    def validate_json(self, data: str | bytes | bytearray, /, **kwargs: Any) -> T:
        """Validate straight from JSON text (no ``json.loads`` first)."""
        return self.adapter.validate_json(data, **kwargs)

    def read_json(self, data: str | bytes | bytearray) -> T:
        """Validate an answer straight from its bytes, at the cost of pydantic's core alone."""
        result: T = self.adapter.validator.validate_json(data)
        return result

    def dump_python(self, value: T, /, **kwargs: Any) -> Any:
        return self.adapter.dump_python(value, **kwargs)

    def json_schema(self, **kwargs: Any) -> dict[str, Any]:
        return self.adapter.json_schema(**kwargs)


# --- errors -----------------------------------------------------------------------------------------


def describe_errors(exc: ValidationError, limit: int = 3) -> str:
    """``loc: message`` for the first ``limit`` problems of ``exc``, as a person would read them.

    The union branch labels are left out of each location (``items.0.TopReportItem.size``), and so is
    the unknown branch's refusal of a known ``@type`` (the known variant's own errors say what is wrong)
    and the known branch's "tag not found" when the unknown branch has errors of its own.
    """
    problems = [f"{_location(error['loc'])}: {error['msg']}" for error in _meaningful(exc.errors())]
    if not problems:  # nothing left once the noise is out: say what pydantic said
        problems = [str(exc)]
    shown = "; ".join(problems[:limit])
    return shown + (f" (+{len(problems) - limit} more)" if len(problems) > limit else "")


def _location(loc: Iterable[Any]) -> str:
    return ".".join(str(part) for part in loc if part not in (KNOWN_TAG, UNKNOWN_TAG)) or "(document)"


def _meaningful(errors: Iterable[Any]) -> list[Any]:
    return [
        error
        for error in errors
        if not isinstance(error.get("ctx", {}).get("error"), KnownTypeMismatch)
        and not (error["type"] in _TAG_ERRORS and tuple(error["loc"][-1:]) == (KNOWN_TAG,))
    ]


#: A polymorphic object's ``@type`` is not a known one: the unknown branch's errors say the rest.
_TAG_ERRORS = frozenset({"union_tag_invalid", "union_tag_not_found"})
