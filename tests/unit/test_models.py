"""Unit tests of the document models (spec 2.2 to 2.7 and beyond-the-spec.md)."""

from __future__ import annotations

import copy
import json
import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from airflow_provider_loadtest import models as m

FIXTURES = Path(__file__).parent / "fixtures"
LOGGER = "airflow_provider_loadtest.models"


def dumps(data: Any) -> str:
    """JSON text in a canonical key order: JSON objects are unordered (the models keep no key order),
    while int vs float, nulls and every key still show."""
    return json.dumps(data, sort_keys=True)


def assert_round_trip(parsed: object, doc: Any) -> None:
    """The written-back document is the input (int/float, nulls, extras; key order aside)."""
    assert isinstance(parsed, m.ApiModel)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pydantic serialization warnings would mean a wrong union branch
        out = parsed.to_api()
    assert dumps(out) == dumps(doc)


# --------------------------------------------------------------------------------------------------
# Sample documents. Key orders differ from the models' declaration order, and `@type` is not always
# first: a document is read whatever its order.

INTERVAL = {"lowerEndpoint": 1700000000000, "lowerBoundType": "CLOSED", "upperBoundType": "OPEN"}
METRIC = {
    "id": "RESPONSE_TIME_AVG",
    "type": "WEB",
    "benchResultId": "br-1",
    "filters": [{"@type": "SingleTermFilter", "field": "container", "term": "login"}],
    "configs": [{"@type": "ApdexReportConfig", "satisfying": 500, "tolerating": 1500.5}],
}
SETTINGS = [
    {"@type": "TableUiSortSettings", "active": "name", "direction": "asc"},
    {"@type": "StatisticTreeUiSettings", "nodeId": "n-1"},
]
FILTERS = [
    {"@type": "SingleTermFilter", "field": "f", "term": "t"},
    {"field": "g", "@type": "MultiTermFilter", "terms": ["a", "b"]},
]

# (@type, class, fully populated sample)
FILTER_SAMPLES: list[tuple[str, type[m.ApiModel], dict[str, Any]]] = [
    ("SingleTermFilter", m.SingleTermFilter, {"@type": "SingleTermFilter", "field": "f", "term": "t"}),
    ("MultiTermFilter", m.MultiTermFilter, {"terms": ["x", "y"], "@type": "MultiTermFilter", "field": "f"}),
]

SETTING_SAMPLES: list[tuple[str, type[m.ApiModel], dict[str, Any]]] = [
    (
        "TableUiSortSettings",
        m.TableUiSortSettings,
        {"@type": "TableUiSortSettings", "active": "avg", "direction": "desc"},
    ),
    (
        "NumberTableUiFilter",
        m.NumberTableUiFilter,
        {
            "@type": "NumberTableUiFilter",
            "fieldLabel": "Hits",
            "fieldName": "hits",
            "id": "nf-1",
            "range": {
                "lowerEndpoint": 0,
                "lowerBoundType": "OPEN",
                "upperEndpoint": 10,
                "upperBoundType": "CLOSED",
            },
        },
    ),
    ("StringUiFilter", m.StringUiFilter, {"@type": "StringUiFilter", "value": "login"}),
    (
        "TimeRangeTableUiFilter",
        m.TimeRangeTableUiFilter,
        {
            "@type": "TimeRangeTableUiFilter",
            "id": "tr-1",
            "fieldName": "date",
            "fieldLabel": "Date",
            "range": {"from": 1700000000000, "to": 1700000600000},
        },
    ),
    (
        "ValueTableUiFilter",
        m.ValueTableUiFilter,
        {
            "@type": "ValueTableUiFilter",
            "fieldLabel": "Code",
            "fieldName": "code",
            "id": "v-1",
            "label": "Not found",
            "value": "404",
        },
    ),
    (
        "StringTableUiFilter",
        m.StringTableUiFilter,
        {
            "@type": "StringTableUiFilter",
            "fieldLabel": "Name",
            "fieldName": "name",
            "id": "s-1",
            "matchType": "CONTAINS",
            "value": "api",
            "ignoreCase": True,
        },
    ),
    (
        "StatisticTreeUiSettings",
        m.StatisticTreeUiSettings,
        {"@type": "StatisticTreeUiSettings", "nodeId": "root"},
    ),
]

SELECTOR_SAMPLES: list[tuple[str, type[m.ApiModel], dict[str, Any]]] = [
    (
        "TrendReportCreationDateSelector",
        m.TrendReportCreationDateSelector,
        {"@type": "TrendReportCreationDateSelector", "range": INTERVAL},
    ),
    (
        "TrendReportUserDefinedSelector",
        m.TrendReportUserDefinedSelector,
        {"@type": "TrendReportUserDefinedSelector", "resultIdsToName": {"br-2": "Before", "br-1": "After"}},
    ),
    (
        "TrendReportNameSelector",
        m.TrendReportNameSelector,
        {"search": "nightly", "type": "STARTS_WITH", "@type": "TrendReportNameSelector"},
    ),
    (
        "TrendReportTagsSelector",
        m.TrendReportTagsSelector,
        {"@type": "TrendReportTagsSelector", "tags": ["ci", "main"]},
    ),
]

CONFIG_SAMPLES: list[tuple[str, type[m.ApiModel], dict[str, Any]]] = [
    (
        "TrendReportConfig",
        m.TrendReportConfig,
        {"@type": "TrendReportConfig", "selectors": [s for _, _, s in SELECTOR_SAMPLES], "shownResults": 5},
    ),
    (
        "TimeRangeReportConfig",
        m.TimeRangeReportConfig,
        {"@type": "TimeRangeReportConfig", "from": 1700000000000, "to": 1700000900000},
    ),
    (
        "ApdexReportConfig",
        m.ApdexReportConfig,
        {"@type": "ApdexReportConfig", "satisfying": 0.5, "tolerating": 2},
    ),
    (
        "SingleColorReportConfig",
        m.SingleColorReportConfig,
        {"@type": "SingleColorReportConfig", "color": "#ff0000"},
    ),
    (
        "ExportReportConfig",
        m.ExportReportConfig,
        {
            "@type": "ExportReportConfig",
            "coverPage": "FULL",
            "orientation": "PORTRAIT",
            "pageFormat": "A4",
            "pageMargin": {"top": "1cm", "bottom": "1cm", "left": "2cm", "right": "2cm"},
            "scale": 1.0,
            "tablesRowCount": {"STATISTIC_TABLE": 20, "ERRORS": 10},
        },
    ),
    (
        "ComparisonReportConfig",
        m.ComparisonReportConfig,
        {"@type": "ComparisonReportConfig", "names": ["a", "b"]},
    ),
    (
        "ColorsReportConfig",
        m.ColorsReportConfig,
        {"@type": "ColorsReportConfig", "colors": {"br-1": "#123456", "nested": {"x": 1}}},
    ),
    (
        "GraphReportConfig",
        m.GraphReportConfig,
        {
            "@type": "GraphReportConfig",
            "acceptableErrorsPercentage": 5,
            "acceptableResponseSize": 1048576,
            "displayColorDots": True,
            "displayThresholdLabel": False,
            "maxColumns": 10,
            "maxLines": 8,
            "maxPercentiles": 4,
            "maxPies": 6,
            "maxStatistics": 12,
            "thresholdColors": {"WARNING": "#ffa500", "CRITICAL": "#ff0000"},
        },
    ),
]

ITEM_SAMPLES: list[tuple[str, type[m.ApiModel], dict[str, Any]]] = [
    (
        "MonitorsTableReportItem",
        m.MonitorsTableReportItem,
        {
            "@type": "MonitorsTableReportItem",
            "id": "i1",
            "name": "Monitors",
            "benchResultId": "br-1",
            "settings": SETTINGS,
        },
    ),
    (
        "StatisticTreeReportItem",
        m.StatisticTreeReportItem,
        {
            "@type": "StatisticTreeReportItem",
            "id": "i2",
            "name": "Tree",
            "metrics": [METRIC],
            "settings": SETTINGS,
        },
    ),
    (
        "LoadGeneratorsChartReportItem",
        m.LoadGeneratorsChartReportItem,
        {
            "@type": "LoadGeneratorsChartReportItem",
            "id": "i3",
            "name": "LG",
            "benchResultId": "br-1",
            "monitorType": "JVM",
        },
    ),
    (
        "TrendConfigReportItem",
        m.TrendConfigReportItem,
        {"@type": "TrendConfigReportItem", "id": "i4", "name": "Trend"},
    ),
    (
        "PieChartReportItem",
        m.PieChartReportItem,
        {"@type": "PieChartReportItem", "id": "i5", "name": "Pie", "metrics": [METRIC]},
    ),
    (
        "TopReportItem",
        m.TopReportItem,
        {"@type": "TopReportItem", "id": "i6", "name": "Top", "metric": METRIC, "size": 10},
    ),
    (
        "TextReportItem",
        m.TextReportItem,
        {"name": "Intro", "@type": "TextReportItem", "id": "i7", "description": "Hello"},
    ),
    (
        "ThresholdAlarmReportItem",
        m.ThresholdAlarmReportItem,
        {
            "@type": "ThresholdAlarmReportItem",
            "id": "i8",
            "name": "Alarms",
            "metric": METRIC,
            "settings": SETTINGS,
        },
    ),
    (
        "LoadGeneratorsTreeReportItem",
        m.LoadGeneratorsTreeReportItem,
        {
            "@type": "LoadGeneratorsTreeReportItem",
            "id": "i9",
            "name": "LG tree",
            "benchResultId": "br-1",
            "settings": [],
        },
    ),
    (
        "SynopsisReportItem",
        m.SynopsisReportItem,
        {"@type": "SynopsisReportItem", "id": "i10", "name": "Syn", "benchResultId": "br-1"},
    ),
    (
        "StatisticTableReportItem",
        m.StatisticTableReportItem,
        {
            "@type": "StatisticTableReportItem",
            "id": "i11",
            "name": "Stats",
            "computeType": "DELTA",
            "metrics": [METRIC],
            "settings": SETTINGS,
            "size": 25,
        },
    ),
    (
        "StackedChartReportItem",
        m.StackedChartReportItem,
        {
            "@type": "StackedChartReportItem",
            "id": "i12",
            "name": "Stacked",
            "metric": METRIC,
            "mode": "PERCENT",
        },
    ),
    (
        "LineChartReportItem",
        m.LineChartReportItem,
        {"@type": "LineChartReportItem", "id": "i13", "name": "Line", "metrics": [METRIC]},
    ),
    (
        "InsightsReportItem",
        m.InsightsReportItem,
        {
            "@type": "InsightsReportItem",
            "id": "i14",
            "name": "Insights",
            "benchResultId": "br-1",
            "filters": FILTERS,
            "sampleType": "ERRORS",
            "settings": SETTINGS,
            "thresholds": {"RESPONSE_TIME_AVG": {"warning": 500, "critical": 1000.0}},
        },
    ),
    (
        "PercentilesChartReportItem",
        m.PercentilesChartReportItem,
        {
            "@type": "PercentilesChartReportItem",
            "id": "i15",
            "name": "Pct",
            "metrics": [METRIC],
            "percentiles": [50, 90, 99.9, 100.0],
        },
    ),
    (
        "AreaRangeChartReportItem",
        m.AreaRangeChartReportItem,
        {
            "@type": "AreaRangeChartReportItem",
            "id": "i16",
            "name": "Area",
            "metrics": [METRIC],
            "rangeType": "RAW",
            "referenceType": "DATE_HISTOGRAM",
        },
    ),
    (
        "SummaryReportItem",
        m.SummaryReportItem,
        {"@type": "SummaryReportItem", "id": "i17", "name": "Sum", "metrics": [METRIC]},
    ),
    (
        "ErrorsReportItem",
        m.ErrorsReportItem,
        {
            "@type": "ErrorsReportItem",
            "id": "i18",
            "name": "Errors",
            "benchResultId": "br-1",
            "filters": FILTERS,
            "settings": SETTINGS,
        },
    ),
    (
        "BarChartReportItem",
        m.BarChartReportItem,
        {"@type": "BarChartReportItem", "id": "i19", "name": "Bars", "metrics": [METRIC], "stacked": True},
    ),
    (
        "TextualMonitorReportItem",
        m.TextualMonitorReportItem,
        {
            "@type": "TextualMonitorReportItem",
            "id": "i20",
            "name": "Text mon",
            "metric": METRIC,
            "settings": SETTINGS,
        },
    ),
]

FAMILIES: dict[str, tuple[Any, list[tuple[str, type[m.ApiModel], dict[str, Any]]], type[m.ApiModel]]] = {
    "config": (m.BenchReportConfigAdapter, CONFIG_SAMPLES, m.UnknownReportConfig),
    "selector": (m.TrendSelectorAdapter, SELECTOR_SAMPLES, m.UnknownTrendSelector),
    "item": (m.ReportItemAdapter, ITEM_SAMPLES, m.UnknownReportItem),
    "filter": (m.QueryFilterAdapter, FILTER_SAMPLES, m.UnknownQueryFilter),
    "setting": (m.UiSettingAdapter, SETTING_SAMPLES, m.UnknownUiSetting),
}

VARIANTS = [
    pytest.param(family, tag, cls, sample, id=f"{family}-{tag}")
    for family, (_, samples, _) in FAMILIES.items()
    for tag, cls, sample in samples
]


def test_every_spec_variant_has_a_sample() -> None:
    """The samples cover all variants listed in spec 2.3, 2.4, 2.6 and 2.7 (guards the parametrisation)."""
    assert len(CONFIG_SAMPLES) == 8
    assert len(SELECTOR_SAMPLES) == 4
    assert len(ITEM_SAMPLES) == 20
    assert len(FILTER_SAMPLES) == 2
    assert len(SETTING_SAMPLES) == 7
    for _, samples, _ in FAMILIES.values():
        tags = [tag for tag, _, _ in samples]
        assert len(set(tags)) == len(tags)
        for tag, cls, sample in samples:
            assert sample["@type"] == tag
            assert cls.__name__ == tag


@pytest.mark.parametrize(("family", "tag", "cls", "sample"), VARIANTS)
def test_full_variant_parses_and_round_trips(
    family: str, tag: str, cls: type[m.ApiModel], sample: dict[str, Any]
) -> None:
    adapter = FAMILIES[family][0]
    doc = copy.deepcopy(sample)
    parsed = adapter.validate_python(doc)
    assert type(parsed) is cls
    assert parsed.model_dump()["kind"] == tag
    assert_round_trip(parsed, sample)
    # Also through the JSON text and directly through the class.
    assert dumps(adapter.validate_json(json.dumps(sample)).to_api()) == dumps(sample)
    assert dumps(cls.from_api(sample).to_api()) == dumps(sample)
    assert doc == sample  # the input is not mutated


@pytest.mark.parametrize(("family", "tag", "cls", "sample"), VARIANTS)
def test_minimal_variant_parses_and_round_trips(
    family: str, tag: str, cls: type[m.ApiModel], sample: dict[str, Any]
) -> None:
    adapter = FAMILIES[family][0]
    parsed = adapter.validate_python({"@type": tag})
    assert type(parsed) is cls
    assert parsed.to_api() == {"@type": tag}
    # Every other field is optional and unset.
    assert parsed.model_fields_set == {"kind"}


@pytest.mark.parametrize(("family", "tag", "cls", "sample"), VARIANTS)
def test_python_built_variant_dumps_its_type(
    family: str, tag: str, cls: type[m.ApiModel], sample: dict[str, Any]
) -> None:
    built = cls()
    assert built.to_api() == {"@type": tag}
    populated = cls.model_validate({k: v for k, v in sample.items() if k != "@type"})
    assert populated.to_api() == sample  # the @type the document left out, written all the same


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_unknown_type_becomes_opaque_model_and_warns(family: str, caplog: pytest.LogCaptureFixture) -> None:
    adapter, _, unknown_cls = FAMILIES[family]
    doc = {"name": "future", "@type": "FutureThing2030", "nested": {"z": 1, "a": [0.5, 1, None]}, "n": 1.0}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        parsed = adapter.validate_python(doc)
    assert type(parsed) is unknown_cls
    assert isinstance(parsed, m.UnknownModel)
    assert parsed.kind == "FutureThing2030"
    assert_round_trip(parsed, doc)
    records = [r for r in caplog.records if r.name == LOGGER]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING
    assert "FutureThing2030" in records[0].getMessage()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_missing_type_becomes_opaque_model(family: str, caplog: pytest.LogCaptureFixture) -> None:
    adapter, _, unknown_cls = FAMILIES[family]
    doc = {"id": "x", "whatever": True}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        parsed = adapter.validate_python(doc)
    assert type(parsed) is unknown_cls
    assert_round_trip(parsed, doc)
    assert any(r.name == LOGGER for r in caplog.records)


def test_known_type_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        m.ReportItemAdapter.validate_python({"@type": "TextReportItem", "description": "x"})
    assert [r for r in caplog.records if r.name == LOGGER] == []


def test_known_type_with_wrong_field_type_still_fails() -> None:
    """Tolerance is for unknown types and values, not for broken known documents."""
    with pytest.raises(ValidationError):
        m.ReportItemAdapter.validate_python({"@type": "TopReportItem", "size": "ten"})


# --------------------------------------------------------------------------------------------------
# Whole documents


def full_template() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / "report_template_full.json").read_text())
    return doc


def test_fixture_contains_every_item_and_config_variant() -> None:
    doc = full_template()
    assert {i["@type"] for i in doc["items"]} == {tag for tag, _, _ in ITEM_SAMPLES}
    assert {c["@type"] for c in doc["configs"]} == {tag for tag, _, _ in CONFIG_SAMPLES}


def test_full_report_template_round_trips() -> None:
    text = (FIXTURES / "report_template_full.json").read_text()
    doc = json.loads(text)
    parsed = m.ReportDefinition.from_api(doc)
    assert [type(i).__name__ for i in parsed.items or []] == [i["@type"] for i in doc["items"]]
    assert_round_trip(parsed, doc)
    # Through the list answer of GET /analysis/bench-report-templates/by-workspace/{id} too.
    templates = m.ReportTemplateListAdapter.validate_python([doc, {"id": "t2", "name": "Empty"}])
    assert [t.to_api() for t in templates] == [doc, {"id": "t2", "name": "Empty"}]
    assert m.ReportTemplate is m.ReportDefinition


def test_report_definition_fields_are_typed() -> None:
    parsed = m.ReportDefinition.from_api(full_template())
    assert parsed.workspace_id == "ws-1"
    assert parsed.created == 1700000000000
    assert parsed.last_modified == 1700000123456
    assert isinstance(parsed.configs, list)
    export = next(c for c in parsed.configs if isinstance(c, m.ExportReportConfig))
    assert export.page_format is m.PageFormat.A4
    assert export.page_margin is not None and export.page_margin.left == "2cm"
    top = next(i for i in parsed.items or [] if isinstance(i, m.TopReportItem))
    assert top.metric is not None
    assert top.metric.id is m.MetricId.RESPONSE_TIME_AVG
    assert top.metric.type is m.SampleType.WEB
    assert isinstance((top.metric.filters or [])[0], m.SingleTermFilter)
    assert isinstance((top.metric.configs or [])[0], m.ApdexReportConfig)


def test_unknown_fields_are_kept_at_every_level() -> None:
    doc = {
        "id": "t1",
        "futureTopLevel": {"a": 1},
        "items": [
            {
                "@type": "TopReportItem",
                "id": "i",
                "futureItemField": [1, 2.5],
                "metric": {
                    "id": "HITS_TOTAL",
                    "futureMetricField": "x",
                    "configs": [
                        {
                            "@type": "TrendReportConfig",
                            "futureCfg": None,
                            "selectors": [
                                {
                                    "@type": "TrendReportCreationDateSelector",
                                    "range": {"lowerEndpoint": 1, "futureRange": 2},
                                },
                            ],
                        }
                    ],
                },
            }
        ],
        "name": "after extras",
    }
    parsed = m.ReportDefinition.from_api(doc)
    assert parsed.model_extra == {"futureTopLevel": {"a": 1}}
    item = (parsed.items or [])[0]
    assert isinstance(item, m.TopReportItem)
    assert item.model_extra == {"futureItemField": [1, 2.5]}
    assert item.metric is not None and item.metric.model_extra == {"futureMetricField": "x"}
    assert_round_trip(parsed, doc)


def test_unknown_item_inside_a_template_is_kept_in_place(caplog: pytest.LogCaptureFixture) -> None:
    doc = {
        "items": [
            {"@type": "TextReportItem", "id": "a"},
            {"@type": "HeatMapReportItem", "id": "b", "cells": 3},
        ]
    }
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        parsed = m.ReportDefinition.from_api(doc)
    items = parsed.items or []
    assert [type(i) for i in items] == [m.TextReportItem, m.UnknownReportItem]
    assert "HeatMapReportItem" in caplog.text
    assert_round_trip(parsed, doc)


def test_explicit_nulls_survive_and_unset_fields_stay_out() -> None:
    doc = {"@type": "TopReportItem", "id": None, "metric": None, "size": 3}
    parsed = m.TopReportItem.from_api(doc)
    assert parsed.to_api() == doc
    assert "name" not in parsed.to_api()
    assert_round_trip(parsed, doc)


def test_a_document_in_any_key_order_is_written_back_whole() -> None:
    doc = {"to": 2, "extra": 0, "from": 1, "@type": "TimeRangeReportConfig"}
    parsed = m.BenchReportConfigAdapter.validate_python(doc)
    assert parsed.to_api() == doc  # key order aside: JSON objects are unordered


def test_field_set_after_parsing_is_written_too() -> None:
    parsed = m.TextReportItem.from_api({"@type": "TextReportItem", "id": "x"})
    parsed.name = "late"
    assert parsed.to_api() == {"@type": "TextReportItem", "id": "x", "name": "late"}


def test_int_and_float_are_preserved() -> None:
    doc = {"@type": "ApdexReportConfig", "satisfying": 1, "tolerating": 1.0}
    parsed = m.ApdexReportConfig.from_api(doc)
    assert type(parsed.satisfying) is int
    assert type(parsed.tolerating) is float
    assert dumps(parsed.to_api()) == '{"@type": "ApdexReportConfig", "satisfying": 1, "tolerating": 1.0}'
    pct = m.PercentilesChartReportItem.from_api(
        {"@type": "PercentilesChartReportItem", "percentiles": [1, 0.5, 2.0]}
    )
    assert json.dumps(pct.to_api()["percentiles"]) == "[1, 0.5, 2.0]"


def test_from_alias_and_python_attribute() -> None:
    cfg = m.TimeRangeReportConfig.from_api({"@type": "TimeRangeReportConfig", "from": 10, "to": 20})
    assert cfg.from_ == 10
    assert cfg.to == 20
    built = m.TimeRangeReportConfig(from_=5, to=6)
    assert built.to_api() == {"@type": "TimeRangeReportConfig", "from": 5, "to": 6}
    assert "from_" not in built.to_api()
    rng = m.TimeRange.from_api({"from": 1, "to": 2})
    assert rng.from_ == 1


def test_python_built_models_dump_their_type() -> None:
    assert m.ExportReportConfig(page_format="A4").to_api() == {
        "@type": "ExportReportConfig",
        "pageFormat": "A4",
    }
    task = m.PrintReportTask(bench_report_id="rep-1", config=m.ExportReportConfig(orientation="LANDSCAPE"))
    assert dumps(task.to_api()) == dumps(
        {
            "@type": "PrintReportTask",
            "benchReportId": "rep-1",
            "config": {"@type": "ExportReportConfig", "orientation": "LANDSCAPE"},
        }
    )
    assert m.PrintReportTask(bench_report_id="r").to_api() == {
        "@type": "PrintReportTask",
        "benchReportId": "r",
    }


def test_alarm_request_body_built_in_python() -> None:
    body = m.ThresholdAlarmReportItem(metric=m.Metric(bench_result_id="br-9", id=m.MetricId.HITS_TOTAL))
    assert body.to_api() == {
        "@type": "ThresholdAlarmReportItem",
        "metric": {"benchResultId": "br-9", "id": "HITS_TOTAL"},
    }


def test_variant_validated_from_another_type_is_rejected() -> None:
    with pytest.raises(ValidationError):
        m.ExportReportConfig.from_api({"@type": "TrendReportConfig"})


def test_snake_case_names_are_accepted_on_input() -> None:
    item = m.ReportItemAdapter.validate_python({"kind": "SynopsisReportItem", "bench_result_id": "b"})
    assert isinstance(item, m.SynopsisReportItem)
    assert item.to_api() == {"@type": "SynopsisReportItem", "benchResultId": "b"}


# --------------------------------------------------------------------------------------------------
# Enums


def test_known_enum_values_become_members_and_unknown_stay_strings() -> None:
    known = m.Metric.from_api({"id": "USERLOAD", "type": "LOAD"})
    assert known.id is m.MetricId.USERLOAD
    assert known.type is m.SampleType.LOAD
    unknown = m.Metric.from_api({"id": "RESPONSE_TIME_PERCENTILE_999", "type": "GRPC"})
    assert unknown.id == "RESPONSE_TIME_PERCENTILE_999"
    assert type(unknown.id) is str
    assert type(unknown.type) is str
    assert unknown.to_api() == {"id": "RESPONSE_TIME_PERCENTILE_999", "type": "GRPC"}
    fmt = m.ExportReportConfig.from_api({"@type": "ExportReportConfig", "pageFormat": "B5"})
    assert type(fmt.page_format) is str
    assert_round_trip(fmt, {"@type": "ExportReportConfig", "pageFormat": "B5"})
    sel = m.TrendReportNameSelector.from_api({"@type": "TrendReportNameSelector", "type": "REGEX"})
    assert sel.type == "REGEX"


def test_enum_value_sets_match_the_spec() -> None:
    assert len(m.MetricId) == 53
    assert {e.value for e in m.SampleType} == {
        "BASIC",
        "WEB",
        "LOAD",
        "ERRORS",
        "NUMBER_COUNTER",
        "TEXTUAL_COUNTER",
        "THRESHOLD_ALARM",
        "HIT",  # the service's documentation (issue 9, point 11)
        "CONTAINER",
    }
    assert [e.value for e in m.PageFormat] == [
        "A0", "A1", "A2", "A3", "A4", "A5", "A6", "LETTER", "LEGAL", "TABLOID", "LEDGER",
    ]  # fmt: skip
    assert [e.value for e in m.BenchResultState] == [
        "CREATED", "PENDING", "SCHEDULED", "SCALING", "PREPARING",
        "INITIALIZING", "RUNNING", "FINISHED", "ABORTED", "ERROR",
    ]  # fmt: skip
    assert {e.value for e in m.NameMatchType} == {
        "EQUALS",
        "EQUALS_IGNORECASE",
        "CONTAINS",
        "CONTAINS_IGNORECASE",
        "STARTS_WITH",
        "ENDS_WITH",
        "STARTS_WITH_IGNORECASE",
        "ENDS_WITH_IGNORECASE",
    }
    assert [e.value for e in m.TaskStatus] == ["PENDING", "SUCCESS", "FAILED"]


def test_alarm_severity_orders_by_gravity() -> None:
    passed, warning, critical = m.AlarmSeverity.PASSED, m.AlarmSeverity.WARNING, m.AlarmSeverity.CRITICAL
    assert passed < warning < critical
    assert critical > warning >= passed
    assert not critical < passed  # alphabetical order would say CRITICAL < PASSED
    assert max([warning, critical, passed]) is critical
    assert sorted([critical, passed, warning]) == [passed, warning, critical]
    assert [s.rank for s in (passed, warning, critical)] == [0, 1, 2]
    assert m.AlarmSeverity.rank_of("WARNING") == 1
    assert m.AlarmSeverity.rank_of("FATAL") is None
    assert m.AlarmSeverity.rank_of(None) is None


# --------------------------------------------------------------------------------------------------
# Interval


@pytest.mark.parametrize(
    ("interval", "value", "expected"),
    [
        (
            {
                "lowerEndpoint": 10,
                "lowerBoundType": "CLOSED",
                "upperEndpoint": 20,
                "upperBoundType": "CLOSED",
            },
            10,
            True,
        ),
        (
            {
                "lowerEndpoint": 10,
                "lowerBoundType": "CLOSED",
                "upperEndpoint": 20,
                "upperBoundType": "CLOSED",
            },
            20,
            True,
        ),
        (
            {"lowerEndpoint": 10, "lowerBoundType": "OPEN", "upperEndpoint": 20, "upperBoundType": "OPEN"},
            10,
            False,
        ),
        (
            {"lowerEndpoint": 10, "lowerBoundType": "OPEN", "upperEndpoint": 20, "upperBoundType": "OPEN"},
            20,
            False,
        ),
        (
            {"lowerEndpoint": 10, "lowerBoundType": "OPEN", "upperEndpoint": 20, "upperBoundType": "OPEN"},
            15,
            True,
        ),
        (
            {"lowerEndpoint": 10, "lowerBoundType": "OPEN", "upperEndpoint": 20, "upperBoundType": "CLOSED"},
            9,
            False,
        ),
        (
            {"lowerEndpoint": 10, "lowerBoundType": "CLOSED", "upperEndpoint": 20, "upperBoundType": "OPEN"},
            21,
            False,
        ),
        ({}, -(10**15), True),
        ({}, 10**15, True),
        ({"lowerEndpoint": 10, "lowerBoundType": "CLOSED"}, 10**15, True),
        ({"lowerEndpoint": 10, "lowerBoundType": "CLOSED"}, 9, False),
        ({"upperEndpoint": 10, "upperBoundType": "OPEN"}, -5, True),
        ({"upperEndpoint": 10, "upperBoundType": "OPEN"}, 10, False),
        ({"lowerEndpoint": None, "upperEndpoint": None}, 0, True),
        ({"lowerEndpoint": 10}, 10, True),  # a missing bound type counts as CLOSED
        ({"upperEndpoint": 10, "upperBoundType": "HALF"}, 10, True),  # so does an unknown one
    ],
)
def test_interval_contains(interval: dict[str, Any], value: int, expected: bool) -> None:
    parsed = m.Interval.from_api(interval)
    assert parsed.contains(value) is expected
    assert parsed.to_api() == interval


def test_interval_bound_types_are_enums() -> None:
    parsed = m.Interval.from_api({"lowerBoundType": "OPEN", "upperBoundType": "CLOSED"})
    assert parsed.lower_bound_type is m.BoundType.OPEN
    assert parsed.upper_bound_type is m.BoundType.CLOSED


# --------------------------------------------------------------------------------------------------
# Run documents (beyond-the-spec)


def test_bench_report_gives_the_run_id() -> None:
    doc = {
        "id": "rep-1",
        "projectId": "p-1",
        "name": "Run",
        "description": "",
        "benchResultIds": ["br-1", "br-0"],
        "configs": [],
        "items": [{"@type": "SynopsisReportItem", "benchResultId": "br-1"}],
        "userId": "u-1",
    }
    report = m.BenchReport.from_api(doc)
    assert report.bench_result_id == "br-1"
    assert report.project_id == "p-1"
    assert_round_trip(report, doc)
    assert m.BenchReport.from_api({"id": "r", "benchResultIds": []}).bench_result_id is None
    assert m.BenchReport.from_api({"id": "r"}).bench_result_id is None
    assert isinstance(report, m.ReportDefinition)


def test_bench_result_state_and_terminal() -> None:
    doc = {
        "id": "br-1",
        "batchId": "b",
        "scenarioId": "s",
        "designProjectId": "dp",
        "resultProjectId": "rp",
        "state": "RUNNING",
    }
    result = m.BenchResult.from_api(doc)
    assert result.state is m.BenchResultState.RUNNING
    assert result.is_terminal is False
    assert_round_trip(result, doc)
    for state in ("FINISHED", "ABORTED", "ERROR"):
        assert m.BenchResult.from_api({"state": state}).is_terminal is True
    future = m.BenchResult.from_api({"state": "ARCHIVING"})
    assert future.state == "ARCHIVING"
    assert future.is_terminal is False
    assert m.BenchResult.from_api({}).is_terminal is False
    assert m.BenchResultState.ERROR.is_terminal
    assert not m.BenchResultState.PENDING.is_terminal


@pytest.mark.parametrize(
    ("value", "percent"),
    [
        (0.5, 0.5),  # a percentage with decimals, as the official clients print it (issue 9, point 8)
        (0.0, 0.0),
        (1.0, 1.0),  # not a fraction: the old 0-to-1 guess is gone
        (0.25, 0.25),
        (1, 1.0),  # an integer is always a percentage
        (0, 0.0),
        (50, 50.0),
        (100, 100.0),
        (42.5, 42.5),  # a float above 1 is a percentage
        (150, 100.0),  # clamped
        (-3, 0.0),
    ],
)
def test_progress_percent_rule(value: float, percent: float) -> None:
    progress = m.Progress.from_api({"value": value})
    assert progress.percent == pytest.approx(percent)
    assert json.dumps(progress.to_api()) == json.dumps({"value": value})


def test_progress_without_value() -> None:
    assert m.Progress.from_api({}).percent is None
    assert m.Progress.from_api({"value": None}).percent is None


def test_global_metrics_by_name() -> None:
    doc = {
        "metrics": [
            {"name": "Hits", "value": 1200, "unit": ""},
            {"name": "Errors", "value": 0.5, "unit": "%"},
            {"name": "Avg. elapsed", "value": "n/a", "unit": "ms", "color": "#fff"},
            {"value": 3},
            {"name": "Hits", "value": 1, "unit": "dup"},
        ]
    }
    metrics = m.GlobalMetrics.from_api(doc)
    by_name = metrics.by_name()
    assert list(by_name) == ["Hits", "Errors", "Avg. elapsed"]
    assert by_name["Hits"].value == 1200
    assert by_name["Errors"].unit == "%"
    assert by_name["Avg. elapsed"].value == "n/a"
    assert_round_trip(metrics, doc)
    assert m.GlobalMetrics.from_api({}).by_name() == {}


def test_threshold_alarms() -> None:
    doc = [
        {
            "id": "a1",
            "severity": "WARNING",
            "name": "slow",
            "metric": {"id": "RESPONSE_TIME_AVG"},
            "value": 812.5,
        },
        {"id": "a2", "severity": "CRITICAL", "message": "too many errors", "extra": [1]},
        {"id": "a3", "severity": "CATASTROPHIC"},
    ]
    alarms = m.ThresholdAlarmListAdapter.validate_python(doc)
    assert [a.severity for a in alarms] == [m.AlarmSeverity.WARNING, m.AlarmSeverity.CRITICAL, "CATASTROPHIC"]
    assert type(alarms[2].severity) is str
    assert [a.severity_rank for a in alarms] == [1, 2, None]
    assert dumps([a.to_api() for a in alarms]) == dumps(doc)
    worst = max((a.severity for a in alarms if isinstance(a.severity, m.AlarmSeverity)), default=None)
    assert worst is m.AlarmSeverity.CRITICAL


def test_workspaces() -> None:
    doc = [{"id": "ws-1", "name": "Main", "userId": "u", "description": None}]
    workspaces = m.WorkspaceListAdapter.validate_python(doc)
    assert workspaces[0].name == "Main"
    assert [w.to_api() for w in workspaces] == doc


# --------------------------------------------------------------------------------------------------
# Print tasks


def test_print_task_results_old_shape() -> None:
    done = m.TaskResultAdapter.validate_python({"@type": "PrintReportTaskResult", "filename": "report.pdf"})
    assert isinstance(done, m.PrintReportTaskResult)
    assert done.filename == "report.pdf"
    failed_doc = {"@type": "FailedTaskResult", "stackTrace": "java.lang.NPE\n\tat x", "message": "boom"}
    failed = m.TaskResultAdapter.validate_python(failed_doc)
    assert isinstance(failed, m.FailedTaskResult)
    assert failed.stack_trace.startswith("java.lang.NPE") if failed.stack_trace else False
    assert_round_trip(failed, failed_doc)


def test_unknown_task_result(caplog: pytest.LogCaptureFixture) -> None:
    doc = {"@type": "ZipReportTaskResult", "filename": "x.zip"}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        parsed = m.TaskResultAdapter.validate_python(doc)
    assert isinstance(parsed, m.UnknownTaskResult)
    assert "ZipReportTaskResult" in caplog.text
    assert_round_trip(parsed, doc)


def test_task_status_envelope_new_shape() -> None:
    doc = {
        "status": "SUCCESS",
        "result": {"@type": "PrintReportTaskResult", "filename": "r.pdf"},
        "taskId": "t-1",
    }
    env = m.TaskStatusEnvelope.from_api(doc)
    assert env.status is m.TaskStatus.SUCCESS
    assert isinstance(env.result, m.PrintReportTaskResult)
    assert env.resolved_filename == "r.pdf"
    assert_round_trip(env, doc)
    flat = m.TaskStatusEnvelope.from_api({"status": "SUCCESS", "filename": "flat.pdf"})
    assert flat.resolved_filename == "flat.pdf"
    failed = m.TaskStatusEnvelope.from_api({"status": "FAILED", "message": "no data"})
    assert failed.resolved_message == "no data"
    assert failed.resolved_filename is None
    running = m.TaskStatusEnvelope.from_api({"status": "RUNNING"})
    assert running.status == "RUNNING"
    assert type(running.status) is str


@pytest.mark.parametrize(
    ("body", "status", "filename", "message"),
    [
        (None, m.TaskStatus.PENDING, None, None),
        ("", m.TaskStatus.PENDING, None, None),
        ({}, m.TaskStatus.PENDING, None, None),
        ({"@type": "PrintReportTaskResult", "filename": "a.pdf"}, m.TaskStatus.SUCCESS, "a.pdf", None),
        ({"@type": "FailedTaskResult", "stackTrace": "trace"}, m.TaskStatus.FAILED, None, "trace"),
        ({"@type": "FailedTaskResult", "stackTrace": "t", "message": "m"}, m.TaskStatus.FAILED, None, "m"),
        ({"status": "PENDING"}, m.TaskStatus.PENDING, None, None),
        (
            {"status": "FAILED", "result": {"@type": "FailedTaskResult", "message": "x"}},
            m.TaskStatus.FAILED,
            None,
            "x",
        ),
    ],
)
def test_task_poll_body_normalisation(
    body: Any, status: m.TaskStatus, filename: str | None, message: str | None
) -> None:
    env = m.TaskStatusEnvelope.from_poll_body(body)
    assert env.status is status
    assert env.resolved_filename == filename
    assert env.resolved_message == message


def test_task_poll_body_rejects_non_objects() -> None:
    with pytest.raises(ValidationError):
        m.TaskStatusEnvelope.from_poll_body([1, 2])


def test_models_do_not_import_airflow() -> None:
    package = Path(m.__file__).parent
    for source in package.glob("*.py"):
        text = source.read_text()
        assert "import airflow\n" not in text
        assert "from airflow " not in text and "from airflow." not in text, source.name


def test_type_adapter_of_list_of_unions() -> None:
    adapter: TypeAdapter[list[m.ReportItem]] = TypeAdapter(list[m.ReportItem])
    items = adapter.validate_python([{"@type": "TextReportItem"}, {"@type": "SummaryReportItem"}])
    assert [type(i) for i in items] == [m.TextReportItem, m.SummaryReportItem]
