from __future__ import annotations

import pytest

from airflow_provider_loadtest.api.validation import is_templated, validate_path_id

BAD_IDS = [
    "",
    " ",
    "abc def",
    " abc",
    "abc\t",
    "a/b",
    "a\\b",
    "..",
    "a..b",
    "../admin",
    "a?templateId=x",
    "a#frag",
    "a%2Fb",
    "a\x00b",
    "a\nb",
    "a\x7f",
]


@pytest.mark.parametrize("value", BAD_IDS)
def test_bad_ids_are_refused_naming_the_parameter(value: str) -> None:
    with pytest.raises(ValueError, match="scenario_id"):
        validate_path_id("scenario_id", value)


@pytest.mark.parametrize("value", ["abc", "A1b2-C3_d4", "5f1e8c2a9b", "x.y", "ÉtéScénario"])
def test_good_ids_pass_unchanged(value: str) -> None:
    assert validate_path_id("scenario_id", value) == value


@pytest.mark.parametrize("value", [None, 42, ["a"]])
def test_non_strings_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="must be a string"):
        validate_path_id("workspace_id", value)


def test_is_templated() -> None:
    assert is_templated("{{ var.value.x }}")
    assert is_templated("{% if x %}a{% endif %}")
    assert not is_templated("plain")
    assert not is_templated(None)
