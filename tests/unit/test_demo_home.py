"""``make demo`` keeps its Airflow home where it says, never deletes a folder it did not make, and ends by
printing the URLs of the "Load tests" view that ``make demo-ui`` serves (the plugin's own routes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools import demo


def test_a_fresh_home_replaces_only_a_demos_own(tmp_path: Path) -> None:
    home = tmp_path / "demo-airflow"
    assert demo.fresh_home(home) == home.resolve() and not home.exists()
    home.mkdir()
    (home / demo.HOME_MARK).write_text("made by make demo")
    (home / "airflow.db").write_text("old")
    demo.fresh_home(home)
    assert not home.exists()
    home.mkdir()
    (home / "precious.txt").write_text("mine")
    with pytest.raises(SystemExit, match="was not made by the demo"):
        demo.fresh_home(home)
    assert (home / "precious.txt").exists()


def test_the_printed_urls_are_the_views_own() -> None:
    from airflow_provider_loadtest.plugins import URL_PREFIX

    text = demo.how_to_see_the_view(Path("/x/demo-airflow"), [demo.GATE_DAG_ID], port=demo.UI_PORT)
    assert "make demo-ui" in text and "/x/demo-airflow" in text
    url = f"http://127.0.0.1:{demo.UI_PORT}{URL_PREFIX}/dags/{demo.GATE_DAG_ID}"
    assert url in text.splitlines()[-1]
    source = (Path(demo.__file__).parents[1] / "airflow_provider_loadtest/plugins/app.py").read_text()
    assert '@app.get("/dags/{dag_id}"' in source


def test_serve_refuses_a_folder_without_a_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main(["--serve", "--home", str(tmp_path)]) == 2
    assert "run `make demo` first" in capsys.readouterr().err


def test_the_makefile_serves_the_demo_home_on_the_documented_port() -> None:
    makefile = (Path(demo.__file__).parents[1] / "Makefile").read_text()
    assert "demo-ui: venv\n\t$(BIN)/python -m devtools.demo --serve --port $(DEMO_UI_PORT)" in makefile
    assert f"DEMO_UI_PORT ?= {demo.UI_PORT}" in makefile
