"""Configuring the object storage tier: the ``blobs`` URL and threshold, from the file, the
environment or arguments, checked without the S3 client and never holding a credential."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cargohold import ConfigError
from cargohold._config import load_settings
from cargohold.store import open_store


def test_the_blobs_url_comes_from_the_environment_over_the_file_in_canonical_form(
    tmp_path: Path,
) -> None:
    (tmp_path / "cargohold.toml").write_text(
        'blobs = "s3://from-file/prefix/"\nblobs_threshold = 1024\n', encoding="utf-8"
    )
    from_file = load_settings(environ={}, cwd=tmp_path)
    assert (from_file.blobs, from_file.blobs_threshold) == ("s3://from-file/prefix", 1024)

    env = {"CARGOHOLD_BLOBS": "s3://from-env/a/b", "CARGOHOLD_BLOBS_THRESHOLD": "0"}
    from_env = load_settings(environ=env, cwd=tmp_path)
    assert (from_env.blobs, from_env.blobs_threshold) == ("s3://from-env/a/b", 0)


def test_without_blobs_bodies_stay_in_postgresql_and_the_threshold_is_64_kib(
    tmp_path: Path,
) -> None:
    settings = load_settings(environ={}, cwd=tmp_path)
    assert (settings.blobs, settings.blobs_threshold) == (None, 64 * 1024)


@pytest.mark.parametrize(
    "url",
    [
        "https://bucket/prefix",
        "s3:///prefix",
        "s3://Bucket-Upper/prefix",
        "s3://b/prefix",
        "s3://bucket:9000/prefix",
        "s3://bucket/prefix?endpoint=http://127.0.0.1",
        "s3://bucket/prefix#part",
        "s3://bucket/../escape",
        "s3://bucket/a/b c",
    ],
)
def test_a_blobs_url_that_is_not_a_bucket_and_a_plain_prefix_is_refused(
    url: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(environ={"CARGOHOLD_BLOBS": url}, cwd=tmp_path)
    assert raised.value.code == "config"


def test_a_blobs_url_holding_credentials_is_refused_without_repeating_them(
    tmp_path: Path,
) -> None:
    url = "s3://AKIAEXAMPLEKEY:very-secret-value@bucket/prefix"
    with pytest.raises(ConfigError) as raised:
        load_settings(environ={"CARGOHOLD_BLOBS": url}, cwd=tmp_path)
    assert "very-secret-value" not in str(raised.value)
    assert "AKIAEXAMPLEKEY" not in str(raised.value)


def test_a_negative_threshold_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_settings(environ={"CARGOHOLD_BLOBS_THRESHOLD": "-1"}, cwd=tmp_path)


def test_the_settings_repr_shows_no_bucket(tmp_path: Path) -> None:
    settings = load_settings(environ={"CARGOHOLD_BLOBS": "s3://private-bucket/p"}, cwd=tmp_path)
    assert "private-bucket" not in repr(settings)


def test_blobs_for_a_store_other_than_postgresql_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        open_store("memory://", blobs="s3://bucket/prefix")
    with pytest.raises(ConfigError):
        open_store("", blobs="s3://bucket/prefix")


def test_a_store_without_blobs_never_loads_the_s3_client() -> None:
    code = (
        "import sys, cargohold\n"
        "from cargohold._config import load_settings\n"
        "load_settings(environ={'CARGOHOLD_BLOBS': 's3://bucket/prefix'})\n"
        "cargohold.open_store('memory://').close()\n"
        "print('obstore' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"


def test_blobs_without_obstore_installed_is_a_config_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from _require import require

    require("psycopg", "postgres")
    from cargohold.store._postgres import PostgresStore

    monkeypatch.setitem(sys.modules, "obstore", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "cargohold.store._blobs", raising=False)
    with pytest.raises(ConfigError) as raised:
        PostgresStore("postgresql://nobody@127.0.0.1:1/none", blobs="s3://bucket/prefix")
    assert "cargohold[s3]" in str(raised.value)
