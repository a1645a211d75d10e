"""Base classes shared by every document model (spec 2.2: JSON objects, ``@type`` discriminators).

Three guarantees live here, once, for all models:

* python attributes are snake_case, JSON keys camelCase (``alias_generator=to_camel``);
* unknown fields are kept and written back (``extra="allow"``);
* a document read and written back is identical, key order included.

Reading costs what pydantic's Rust core costs and nothing more: no Python code runs per object while a
document is validated (no wrap validator, no private attribute, no ``model_post_init``), and the
polymorphic unions use pydantic's native ``@type`` discriminator. What a lossless write-back needs is
paid when a document is written back, not when it is read: the entry points (``from_api``,
``model_validate``, ``model_validate_json`` and the :class:`ApiAdapter` of each union) keep a reference
to the JSON a document came from (the bytes, parsed again only if it is written back), and
:meth:`ApiModel.to_api` puts the keys back in that order. Reading is on every poll of a watch loop;
writing back is rare. Answers that are only read (a run's state, its progress) skip even that
(:meth:`ApiModel.read_json`).

Each polymorphic family is one union, tried left to right::

    Annotated[A | B | ..., Field(discriminator="kind"), Tag(KNOWN_TAG)]
    | Annotated[UnknownFamily, Tag(UNKNOWN_TAG)]

A known ``@type`` is routed in Rust; an unknown or missing one fails the first branch at once and is
kept by the family's :class:`UnknownModel`, which refuses the family's known types (``variant_tags``),
so that a known ``@type`` whose fields do not match still fails.
"""

from __future__ import annotations

import json
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
    "remember_input",
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


# --- where a document came from ------------------------------------------------------------------


class _Source:
    """The JSON a read came from: the parsed document, or the text, parsed only when written back."""

    __slots__ = ("_document", "_text")

    def __init__(self, *, document: Any = None, text: str | bytes | bytearray | None = None) -> None:
        self._document = document
        self._text = text

    def document(self) -> Any:
        text = self._text  # read once: another thread may be parsing it too, and clear it meanwhile
        if text is not None:
            try:
                self._document = json.loads(text)
            except (ValueError, RecursionError):  # pydantic read it, so this is near impossible: no order
                self._document = None
            self._text = None
        return self._document


class _Guide:
    """What a model remembers of its input: the JSON it was read from (``index`` into a list answer).

    Kept in the instance ``__dict__`` under a name pydantic leaves alone there: not a field, so not
    dumped, not in ``repr`` or ``dict(model)``, and not compared by ``==`` (where a document came from
    never makes two models unequal); copies and pickles keep it.
    """

    __slots__ = ("_at",)

    def __init__(self, source: _Source, index: int | None = None) -> None:
        #: One attribute, read and replaced whole: two threads writing one model back never see a
        #: narrowed source with the whole answer's index, or the reverse.
        self._at = (source, index)

    def document(self) -> Any:
        source, index = self._at
        document = source.document()
        if index is None:
            return document
        own = document[index] if isinstance(document, list) and index < len(document) else None
        # From now on this model keeps its own part of a list answer, not the whole answer parsed.
        self._at = (_Source(document=own), None)
        return own

    def __reduce__(self) -> tuple[type[_Guide], tuple[_Source]]:
        # A pickle or a deep copy takes this model's own part of a list answer, not the whole answer.
        return _Guide, (_Source(document=self.document()),)


_GUIDE_KEY = "_api_guide"


def _remember(result: Any, source: _Source) -> None:
    """Let ``result`` (a model, or a list of models) restore its input's key order when written back."""
    if isinstance(result, ApiModel):
        _set_guide(result, _Guide(source))
    elif isinstance(result, list):
        for index, item in enumerate(result):
            if isinstance(item, ApiModel):
                _set_guide(item, _Guide(source, index))  # about 0.3 us an item: nothing beside a read


def remember_input(model: ApiModel, document: dict[str, Any]) -> None:
    """Have ``model`` written back in the key order of ``document`` (for a model built from parts)."""
    _set_guide(model, _Guide(_Source(document=document)))


def _set_guide(model: ApiModel, guide: _Guide) -> None:
    model.__dict__[_GUIDE_KEY] = guide


def _guide_of(model: ApiModel) -> Any:
    guide = model.__dict__.get(_GUIDE_KEY)
    return guide.document() if isinstance(guide, _Guide) else None


# --- writing back ---------------------------------------------------------------------------------


class _Plan:
    """Per model class: how input keys map to output keys, and which fields may hold models."""

    __slots__ = ("nested", "orders", "output_key", "type_first", "type_tag")

    def __init__(self, cls: type[ApiModel]) -> None:
        self.output_key: dict[str, str] = {}
        nested: list[tuple[str, str]] = []
        for name, info in cls.model_fields.items():
            key = info.alias or name
            self.output_key[name] = key
            self.output_key[key] = key
            if _holds_models(info.annotation):
                nested.append((name, key))
        self.nested = tuple(nested)
        #: ``@type`` is written first when the input did not place it (a model built in Python).
        self.type_first = "kind" in cls.model_fields
        #: A known variant always writes its ``@type`` (the service needs it to pick the class).
        self.type_tag = _kind_default(cls) if issubclass(cls, TypedModel) else None
        #: Key orders worked out for write-back, by the shape of the document (see ``_reorder``).
        self.orders: dict[tuple[tuple[str, ...], tuple[str, ...] | None], tuple[str, ...] | None] = {}


_PLANS: dict[type[BaseModel], _Plan] = {}


def _plan(cls: type[ApiModel]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _Plan(cls)
    return plan


def _holds_models(annotation: Any) -> bool:
    if isinstance(annotation, type):
        return issubclass(annotation, BaseModel)
    return any(_holds_models(arg) for arg in get_args(annotation))


def _kind_default(cls: type[BaseModel]) -> str:
    default = cls.model_fields["kind"].default
    if not isinstance(default, str):
        raise TypeError(f"{cls.__name__}.kind has no string default")
    return default


def _restore(model: ApiModel, dumped: dict[str, Any], guide: Any) -> None:
    """Make ``dumped`` (pydantic's dump of ``model``, changed in place) what the service must get back:
    ``@type`` present where needed, and keys in the order of the input (``guide``: the input mapping,
    or the model's own remembered input). In place, so that writing back allocates little."""
    own = _guide_of(model)
    raw = own if own is not None else guide
    if type(raw) is not dict:
        raw = None
    plan = _plan(type(model))
    values = model.__dict__
    for name, key in plan.nested:
        out = dumped.get(key)
        if out is None:
            continue
        sub = None
        if raw is not None:
            sub = raw.get(key)
            if sub is None and name != key:
                sub = raw.get(name)
        _restore_value(values[name], out, sub)
    if plan.type_tag is not None and TYPE_KEY not in dumped:
        dumped[TYPE_KEY] = plan.type_tag
    _reorder(dumped, raw, plan)


def _restore_value(value: Any, dumped: Any, guide: Any) -> None:
    if isinstance(value, ApiModel):
        if type(dumped) is dict:
            _restore(value, dumped, guide)
    elif isinstance(value, list) and type(dumped) is list and len(value) == len(dumped):
        guides = guide if type(guide) is list and len(guide) == len(value) else None
        for index, item in enumerate(value):
            sub = guides[index] if guides is not None else None
            if isinstance(item, ApiModel):
                out = dumped[index]
                if type(out) is dict:
                    _restore(item, out, sub)
            elif isinstance(item, list):
                _restore_value(item, dumped[index], sub)


#: How many key orders each model class keeps worked out (emptied when full).
_ORDERS_MAX = 1024


def _reorder(dumped: dict[str, Any], raw: dict[str, Any] | None, plan: _Plan) -> None:
    """Put ``dumped``'s keys in the input's order (see :func:`_wanted_order`), in place.

    Documents of one kind come in few shapes, so the order is mostly looked up, by the dumped keys and
    the input's keys."""
    keys = tuple(dumped)
    shape = (keys, tuple(raw) if raw is not None else None)
    orders = plan.orders
    try:
        wanted = orders[shape]
    except KeyError:
        wanted = _wanted_order(keys, raw, plan)
        if len(orders) >= _ORDERS_MAX:
            orders.clear()
        orders[shape] = wanted
    if wanted is not None:
        for key in wanted:
            dumped[key] = dumped.pop(key)


def _wanted_order(keys: tuple[str, ...], raw: dict[str, Any] | None, plan: _Plan) -> tuple[str, ...] | None:
    """``@type`` first when the input did not place it, then the input's keys, then keys the input did
    not have (set later) in their order; ``None`` when ``keys`` are in that order already."""
    type_first = plan.type_first and TYPE_KEY in keys
    if raw is None:
        if not type_first or keys[0] == TYPE_KEY:
            return None
        return (TYPE_KEY, *(key for key in keys if key != TYPE_KEY))
    wanted = [TYPE_KEY] if type_first and TYPE_KEY not in raw and "kind" not in raw else []
    present = set(keys)
    for input_key in raw:
        key = plan.output_key.get(input_key, input_key)
        if key in present:
            wanted.append(key)
    unique = list(dict.fromkeys(wanted))  # an input may name a field twice (alias and name)
    seen = set(unique)
    ordered = (*unique, *(key for key in keys if key not in seen))
    return None if ordered == keys else ordered


# --- the models ---------------------------------------------------------------------------------


class ApiModel(BaseModel):
    """Base of every document model: camelCase JSON, extras kept, exact round trip (spec 2.2)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="allow",
    )

    def to_api(self) -> dict[str, Any]:
        """The JSON-ready dict to send to the service: camelCase keys, only fields that were set, in
        the order of the document this model was read from (``@type`` first for one built in Python)."""
        dumped = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        _restore(self, dumped, None)
        return dumped

    @classmethod
    def from_api(cls, data: Any) -> Self:
        """Validate a document received from the service (same as ``model_validate``)."""
        return cls.model_validate(data)

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        """pydantic's ``model_validate``, remembering the input's key order for :meth:`to_api`."""
        model = super().model_validate(obj, **kwargs)
        if isinstance(obj, dict):
            _remember(model, _Source(document=obj))
        return model

    @classmethod
    def read_json(cls, json_data: str | bytes | bytearray) -> Self:
        """Read an answer that is only read, never written back (a run's state, progress, metrics):
        straight from the bytes, at the cost of pydantic's core alone. Nothing is remembered for a
        write-back: :meth:`to_api` still writes every field and unknown field, in declaration order."""
        model: Self = cls.__pydantic_validator__.validate_json(json_data)
        return model

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        """pydantic's ``model_validate_json`` (straight from bytes), remembering the input for
        :meth:`to_api`."""
        model = super().model_validate_json(json_data, **kwargs)
        _remember(model, _Source(text=json_data))
        return model


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
    """A ``TypeAdapter`` whose results write back losslessly (:meth:`ApiModel.to_api`).

    pydantic's ``TypeAdapter`` cannot be subclassed; this wraps one, remembering what each result was
    read from. Any other ``TypeAdapter`` method is reached through :attr:`adapter`.
    """

    def __init__(self, kind: Any) -> None:
        self.adapter: TypeAdapter[T] = TypeAdapter(kind)

    def validate_python(self, obj: Any, /, **kwargs: Any) -> T:
        result = self.adapter.validate_python(obj, **kwargs)
        _remember(result, _Source(document=obj))
        return result

    def validate_json(self, data: str | bytes | bytearray, /, **kwargs: Any) -> T:
        """Validate straight from JSON text (no ``json.loads`` first)."""
        result = self.adapter.validate_json(data, **kwargs)
        _remember(result, _Source(text=data))
        return result

    def read_json(self, data: str | bytes | bytearray) -> T:
        """Validate an answer that is only read (see :meth:`ApiModel.read_json`): nothing remembered."""
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
