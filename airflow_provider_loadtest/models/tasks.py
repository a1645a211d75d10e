"""Asynchronous print tasks (``POST /tasks``, ``GET /tasks/{id}/result``; beyond-the-spec "Report PDF").

Two answer shapes are handled: the older bare task result (``PrintReportTaskResult`` /
``FailedTaskResult``, empty body while pending) and the 17.1.0+ status envelope (a *guess*:
``{"status": "PENDING|SUCCESS|FAILED", ...}``). :meth:`TaskStatusEnvelope.from_poll_body` turns
either into one envelope.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self, TypeAlias

from pydantic import Field, Tag

from .base import (
    KNOWN_TAG,
    TYPE_KEY,
    UNKNOWN_TAG,
    ApiAdapter,
    ApiModel,
    TypedModel,
    UnknownModel,
    variant_tags,
)
from .configs import ExportReportConfig
from .enums import Open, TaskStatus

__all__ = [
    "FailedTaskResult",
    "PrintReportTask",
    "PrintReportTaskResult",
    "TaskResult",
    "TaskResultAdapter",
    "TaskStatusEnvelope",
    "UnknownTaskResult",
]


class PrintReportTask(TypedModel):
    """Body of ``POST /tasks`` asking for the PDF of a report; ``config`` is optional."""

    kind: Literal["PrintReportTask"] = Field(default="PrintReportTask", alias=TYPE_KEY)
    bench_report_id: str | None = None
    config: ExportReportConfig | None = None


class PrintReportTaskResult(TypedModel):
    """A finished print task: the PDF's file name, to download from the run's files."""

    kind: Literal["PrintReportTaskResult"] = Field(default="PrintReportTaskResult", alias=TYPE_KEY)
    filename: str | None = None


class FailedTaskResult(TypedModel):
    """A failed task, with the server's message and stack trace."""

    kind: Literal["FailedTaskResult"] = Field(default="FailedTaskResult", alias=TYPE_KEY)
    stack_trace: str | None = None
    message: str | None = None


class UnknownTaskResult(UnknownModel):
    """A task result whose ``@type`` this version does not know; kept verbatim."""

    family: ClassVar[str] = "task result"


TaskResult: TypeAlias = Annotated[
    Annotated[
        PrintReportTaskResult | FailedTaskResult,
        Field(discriminator="kind"),
        Tag(KNOWN_TAG),
    ]
    | Annotated[UnknownTaskResult, Tag(UNKNOWN_TAG)],
    Field(union_mode="left_to_right"),
]
UnknownTaskResult.known_types = variant_tags(TaskResult)

TaskResultAdapter: ApiAdapter[TaskResult] = ApiAdapter(TaskResult)


class TaskStatusEnvelope(ApiModel):
    """Task poll answer in the 17.1.0+ shape (a *guess*): ``status`` plus an optional result."""

    status: Open[TaskStatus] | None = None
    result: TaskResult | None = None
    message: str | None = None
    filename: str | None = None

    @property
    def resolved_filename(self) -> str | None:
        """The PDF file name, from ``filename`` or from a PrintReportTaskResult ``result``."""
        if self.filename:
            return self.filename
        if isinstance(self.result, PrintReportTaskResult):
            return self.result.filename
        return None

    @property
    def resolved_message(self) -> str | None:
        """The failure text: ``message``, else the result's message or stack trace."""
        if self.message:
            return self.message
        if isinstance(self.result, FailedTaskResult):
            return self.result.message or self.result.stack_trace
        return None

    @classmethod
    def from_poll_body(cls, body: Any) -> Self:
        """Normalise any poll answer (old or new shape) into an envelope.

        * ``None``, ``""``, ``b""``, ``{}``: still pending (older servers answer an empty body);
        * a mapping with ``status``: the new envelope, validated as is;
        * a mapping with ``@type``: an old bare result: PrintReportTaskResult -> SUCCESS,
          FailedTaskResult -> FAILED, an unknown type -> an envelope with that result and no status.

        Anything else (a non-object body) raises ``pydantic.ValidationError``.
        """
        if body is None or (isinstance(body, str | bytes | dict) and not body):
            return cls(status=TaskStatus.PENDING)
        if isinstance(body, dict) and "status" in body:
            return cls.from_api(body)
        result = TaskResultAdapter.validate_python(body)
        if isinstance(result, PrintReportTaskResult):
            return cls(status=TaskStatus.SUCCESS, result=result)
        if isinstance(result, FailedTaskResult):
            return cls(status=TaskStatus.FAILED, result=result)
        return cls(result=result)
