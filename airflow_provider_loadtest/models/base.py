"""Base classes shared by every document model (spec 2.2: JSON objects, ``@type`` discriminators).

Three guarantees live here, once, for all models:

* python attributes are snake_case, JSON keys camelCase (``alias_generator=to_camel``);
* unknown fields are kept and written back (``extra="allow"``);
* a document read and written back is identical, key order included: the input's key order is
  remembered by a wrap validator and restored by a wrap serializer (extras stay where they were).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar, Self, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    StrictFloat,
    StrictInt,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "TYPE_KEY",
    "UNKNOWN_TAG",
    "ApiModel",
    "Int",
    "Number",
    "TypedModel",
    "UnknownModel",
    "type_discriminator",
]

logger = logging.getLogger("airflow_provider_loadtest.models")

#: JSON key of the discriminator of polymorphic objects.
TYPE_KEY = "@type"
#: Tag under which each discriminated union routes an unknown (or missing) ``@type``.
UNKNOWN_TAG = "__unknown__"

#: A JSON "number": ``int | float`` in smart mode keeps ``1`` an int and ``0.5`` / ``1.0`` floats. Strict,
#: so that a ``true`` is not read as ``1`` and then written back as a number (no lossless round trip).
Number: TypeAlias = StrictInt | StrictFloat
#: A JSON integer, strict for the same reason.
Int: TypeAlias = StrictInt

_KEY_MAPS: dict[type[BaseModel], dict[str, tuple[str, ...]]] = {}


class ApiModel(BaseModel):
    """Base of every document model: camelCase JSON, extras kept, exact round trip (spec 2.2)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="allow",
    )

    # Keys of the mapping this instance was validated from, in input order (None if built in Python).
    _key_order: tuple[str, ...] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_key_order(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        instance = handler(data)
        if isinstance(data, dict) and instance is not data:
            instance._key_order = tuple(str(key) for key in data)
        return instance

    @model_serializer(mode="wrap")
    def _restore_key_order(self, handler: SerializerFunctionWrapHandler) -> Any:
        dumped = handler(self)
        if not isinstance(dumped, dict):
            return dumped
        order = self._key_order or ()
        # Keys in input order (kwargs order for a model built in Python); a discriminator that was not
        # in the input (TypedModel adds it) goes first; keys not in the input keep their order, last.
        rank: dict[str, int] = {}
        to_output = type(self)._input_to_output_keys()
        for position, key in enumerate(order):
            for candidate in to_output.get(key, (key,)):
                rank.setdefault(candidate, position)
        if "kind" in type(self).model_fields:
            rank.setdefault(TYPE_KEY, -1)
            rank.setdefault("kind", -1)
        tail = len(order)
        keys = sorted(dumped, key=lambda k: rank.get(k, tail))  # stable: new keys keep their order
        return {k: dumped[k] for k in keys}

    @classmethod
    def _input_to_output_keys(cls) -> dict[str, tuple[str, ...]]:
        """Map an input key (alias or field name) to the keys that field may be dumped under."""
        cached = _KEY_MAPS.get(cls)
        if cached is None:
            cached = {}
            for name, info in cls.model_fields.items():
                candidates = (info.alias, name) if info.alias else (name,)
                for key in candidates:
                    cached[key] = candidates
            _KEY_MAPS[cls] = cached
        return cached

    def to_api(self) -> dict[str, Any]:
        """The JSON-ready dict to send to the service: camelCase keys, only fields that were set."""
        result = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        assert isinstance(result, dict)  # noqa: S101 - type narrowing: model_dump of a model is a dict
        return result

    @classmethod
    def from_api(cls, data: Any) -> Self:
        """Validate a document received from the service (same as ``model_validate``)."""
        return cls.model_validate(data)


class TypedModel(ApiModel):
    """A known polymorphic variant: ``kind`` (JSON ``@type``) is a ``Literal`` and is always dumped.

    Subclasses declare ``kind: Literal["Name"] = Field("Name", alias="@type")``.
    """

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        # The service requires @type: dump it even when the model was built without passing it.
        self.model_fields_set.add("kind")


class UnknownModel(ApiModel):
    """Opaque stand-in for a variant whose ``@type`` this version does not know; kept verbatim."""

    kind: str | None = Field(default=None, alias=TYPE_KEY)
    family: ClassVar[str] = "object"

    @model_validator(mode="after")
    def _warn_unknown(self) -> Self:
        logger.warning(
            "Unknown %s @type %r: kept as an opaque %s and written back unchanged",
            self.family,
            self.kind,
            type(self).__name__,
        )
        return self


def type_discriminator(*variants: type[TypedModel]) -> Callable[[Any], str]:
    """Build the callable discriminator of a union: the variant's ``@type`` if known, else UNKNOWN_TAG."""
    tags: dict[str, str] = {}
    by_class: dict[type[BaseModel], str] = {}
    for variant in variants:
        default = variant.model_fields["kind"].default
        if not isinstance(default, str):
            raise TypeError(f"{variant.__name__}.kind has no string default")
        tags[default] = default
        by_class[variant] = default

    def discriminate(value: Any) -> str:
        if isinstance(value, BaseModel):
            return by_class.get(type(value), UNKNOWN_TAG)
        if isinstance(value, dict):
            tag = value.get(TYPE_KEY, value.get("kind"))
            if isinstance(tag, str) and tag in tags:
                return tag
        return UNKNOWN_TAG

    return discriminate
