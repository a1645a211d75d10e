"""What the suite may install outside the repository, and what a skip of such a check means.

Two checks need Debian packages that ``make test`` installs with apt-get when it runs as root: the
real-browser check (chromium) and the production rig's slice (PostgreSQL, Redis).
``LOADTEST_NO_SYSTEM_INSTALLS=1`` says not to: nothing is installed system-wide, and those checks are
skipped with the reason. Under ``CI=true`` a skip of either is a failure instead: a green CI must not
hide that a whole suite never ran.
"""

from __future__ import annotations

import os

import pytest

#: The opt-out's name (the README documents it under this name).
NO_SYSTEM_INSTALLS = "LOADTEST_NO_SYSTEM_INSTALLS"


def system_installs_refused() -> bool:
    """The person running the suite said not to install anything system-wide."""
    return os.environ.get(NO_SYSTEM_INSTALLS, "").strip() == "1"


def in_ci() -> bool:
    """Run by CI (``CI=true``, as CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def skip_or_fail(reason: str) -> None:
    """Skip a check that needs what cannot be had here, with the reason; under CI, fail instead."""
    if in_ci():
        pytest.fail(f"CI=true: this check may not be skipped, and would be: {reason}", pytrace=False)
    pytest.skip(reason)
