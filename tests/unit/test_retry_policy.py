from __future__ import annotations

import logging
import random
from datetime import UTC, datetime

import pytest

from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.api.retry import RetryPolicy, parse_retry_after


def test_retry_after_seconds_and_http_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("garbage") is None
    assert parse_retry_after(None) is None


def test_retry_after_wins_but_is_capped() -> None:
    policy = RetryPolicy(max_delay_s=20)
    assert policy.delay(1, "3") == 3.0
    assert policy.delay(1, "3600") == 20.0


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 8])
def test_backoff_is_exponential_with_jitter_and_capped(attempt: int) -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=10.0)
    ceiling = min(10.0, 2 ** (attempt - 1))
    delays = {policy.delay(attempt, rng=random.Random(seed)) for seed in range(20)}
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert len(delays) > 1  # jittered


def test_bounds_on_attempts_and_total_wait() -> None:
    policy = RetryPolicy(max_attempts=3, max_total_wait_s=10)
    assert policy.allows(1, 0, 5)
    assert not policy.allows(3, 0, 1)
    assert not policy.allows(1, 6, 5)


def test_error_says_whether_a_start_may_have_happened() -> None:
    import pickle

    from airflow_provider_loadtest.api import endpoints
    from airflow_provider_loadtest.api.retry import Attempts, RetryPolicy

    request = endpoints.run_scenario("scn-1")
    never = RetryPolicy(max_attempts=1)
    log = logging.getLogger("test")
    with pytest.raises(LoadTestApiError) as refused:
        Attempts(request, never, log).after_no_answer("refused", never_opened=True)
    with pytest.raises(LoadTestApiError) as dropped:
        Attempts(request, never, log).after_no_answer("dropped", never_opened=False)
    assert not refused.value.reached_service and not refused.value.outcome_unknown
    assert dropped.value.outcome_unknown
    assert pickle.loads(pickle.dumps(refused.value)).reached_service is False
    for status, unknown, never_succeeds in [
        (500, True, False),
        (200, True, False),
        (401, False, True),
        (429, False, False),
        (404, False, True),
    ]:
        error = request.error(status, "x")
        assert (error.outcome_unknown, error.never_succeeds) == (unknown, never_succeeds), status
