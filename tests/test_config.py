"""Configuration: explicit arguments > environment > file > defaults, resolved once."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

import cargohold
import cargohold.store as cargohold_store
from cargohold import (
    ConfigError,
    LimitExceededError,
    Limits,
    Scope,
    ScopedStore,
    UsageError,
    load_settings,
    open_store,
)
from cargohold._config import MAX_CONFIG_BYTES


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project directory: no configuration file anywhere up to it."""
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def test_with_nothing_configured_the_defaults_apply(project: Path) -> None:
    settings = load_settings(environ={}, cwd=project)

    assert settings.store is None
    assert (settings.tenant, settings.session) == ("local", None)
    assert settings.user
    assert settings.limits == Limits()
    assert settings.source is None


def test_cargohold_toml_is_read(project: Path) -> None:
    path = _write(
        project / "cargohold.toml",
        'store = "memory://"\ntenant = "acme"\nuser = "ana"\nsession = "run-1"\n'
        "session_objects = 12\ndefault_ttl = 60\n",
    )

    settings = load_settings(environ={}, cwd=project)

    assert (settings.store, settings.tenant, settings.user, settings.session) == (
        "memory://",
        "acme",
        "ana",
        "run-1",
    )
    assert settings.limits == Limits(session_objects=12, default_ttl=60.0)
    assert settings.source == path


def test_the_tool_cargohold_table_of_pyproject_is_read(project: Path) -> None:
    path = _write(
        project / "pyproject.toml",
        '[project]\nname = "x"\n\n[tool.cargohold]\ntenant = "from-pyproject"\nstore_objects = 9\n',
    )

    settings = load_settings(environ={}, cwd=project)

    assert settings.tenant == "from-pyproject"
    assert settings.limits.store_objects == 9
    assert settings.source == path


def test_cargohold_toml_wins_over_pyproject_in_the_same_folder(project: Path) -> None:
    _write(project / "pyproject.toml", '[tool.cargohold]\ntenant = "pyproject"\n')
    _write(project / "cargohold.toml", 'tenant = "cargohold-toml"\n')

    assert load_settings(environ={}, cwd=project).tenant == "cargohold-toml"


def test_the_nearest_file_walking_up_from_the_working_directory_wins(project: Path) -> None:
    _write(project / "cargohold.toml", 'tenant = "outer"\n')
    inner = project / "a" / "b"
    _write(inner.parent / "cargohold.toml", 'tenant = "inner"\n')
    inner.mkdir()

    assert load_settings(environ={}, cwd=inner).tenant == "inner"
    assert load_settings(environ={}, cwd=project).tenant == "outer"


def test_a_pyproject_without_a_cargohold_table_is_passed_over(project: Path) -> None:
    _write(project / "cargohold.toml", 'tenant = "outer"\n')
    inner = project / "pkg"
    _write(inner / "pyproject.toml", '[project]\nname = "pkg"\n')

    assert load_settings(environ={}, cwd=inner).tenant == "outer"


@pytest.mark.parametrize("how", ["environment", "argument"])
def test_a_named_configuration_file_replaces_the_search(
    project: Path, tmp_path: Path, how: str
) -> None:
    _write(project / "cargohold.toml", 'tenant = "discovered"\nsession = "discovered"\n')
    named = _write(tmp_path / "elsewhere" / "settings.toml", 'tenant = "named"\n')

    if how == "environment":
        settings = load_settings(environ={"CARGOHOLD_CONFIG": str(named)}, cwd=project)
    else:
        settings = load_settings(environ={}, cwd=project, config_file=named)

    assert (settings.tenant, settings.session) == ("named", None)
    assert settings.source == named


def test_a_named_pyproject_is_read_through_its_cargohold_table(
    project: Path, tmp_path: Path
) -> None:
    named = _write(
        tmp_path / "other" / "pyproject.toml", '[tool.cargohold]\nsession = "from-named"\n'
    )

    settings = load_settings(environ={"CARGOHOLD_CONFIG": str(named)}, cwd=project)

    assert settings.session == "from-named"


def test_explicit_beats_environment_beats_file_beats_defaults(project: Path) -> None:
    _write(
        project / "cargohold.toml",
        'tenant = "file"\nuser = "file"\nsession = "file"\nsession_objects = 11\n'
        "store_objects = 111\n",
    )
    environ = {
        "CARGOHOLD_TENANT": "env",
        "CARGOHOLD_USER": "env",
        "CARGOHOLD_SESSION_OBJECTS": "22",
    }

    settings = load_settings({"tenant": "explicit"}, environ=environ, cwd=project)

    assert (settings.tenant, settings.user, settings.session) == ("explicit", "env", "file")
    assert settings.limits == Limits(session_objects=22, store_objects=111)


def test_unset_explicit_values_and_empty_variables_do_not_override(project: Path) -> None:
    _write(project / "cargohold.toml", 'tenant = "file"\nsession = "file"\n')

    settings = load_settings({"tenant": None}, environ={"CARGOHOLD_SESSION": ""}, cwd=project)

    assert (settings.tenant, settings.session) == ("file", "file")


def test_the_process_environment_is_read_when_none_is_given(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_STORE", "memory://")
    monkeypatch.setenv("CARGOHOLD_TENANT", "from-os-environ")

    settings = load_settings(cwd=project)

    assert (settings.store, settings.tenant) == ("memory://", "from-os-environ")


@pytest.mark.parametrize(
    ("source", "text"),
    [
        ("file", "tenant = 'acme'\nsessions = 3\n"),
        ("file", "[limits]\nstore_bytes = 3\n"),
        ("explicit", "colour"),
    ],
)
def test_an_unknown_key_is_a_configuration_error(project: Path, source: str, text: str) -> None:
    if source == "file":
        _write(project / "cargohold.toml", text)
        overrides = None
    else:
        overrides = {text: "blue"}

    with pytest.raises(ConfigError):
        load_settings(overrides, environ={}, cwd=project)


@pytest.mark.parametrize(
    "text",
    [
        'session_objects = "many"',
        "session_objects = 0",
        "store_bytes = -1",
        "max_artifact_bytes = 1.5",
        "default_ttl = 0",
        "tenant = 5",
        "store = ['memory://']",
        "default_ttl = 700000\nmax_ttl = 600000",
    ],
)
def test_a_value_of_the_wrong_type_or_range_in_a_file_is_a_configuration_error(
    project: Path, text: str
) -> None:
    _write(project / "cargohold.toml", text + "\n")

    with pytest.raises(ConfigError):
        load_settings(environ={}, cwd=project)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CARGOHOLD_SESSION_OBJECTS", "many"),
        ("CARGOHOLD_MAX_ARTIFACT_BYTES", "-5"),
        ("CARGOHOLD_DEFAULT_TTL", "soon"),
        ("CARGOHOLD_MAX_TTL", "10"),
    ],
)
def test_a_bad_environment_value_is_a_configuration_error(
    project: Path, name: str, value: str
) -> None:
    with pytest.raises(ConfigError):
        load_settings(environ={name: value}, cwd=project)


@pytest.mark.parametrize("text", ["tenant = ", "[tool\n", "tenant = 'a'\ntenant = 'b'\n"])
def test_an_unparsable_file_is_a_configuration_error_that_names_no_path(
    project: Path, text: str
) -> None:
    _write(project / "cargohold.toml", text)

    with pytest.raises(ConfigError) as raised:
        load_settings(environ={}, cwd=project)

    assert str(project) not in str(raised.value)


def test_a_named_file_that_does_not_exist_is_a_configuration_error(project: Path) -> None:
    with pytest.raises(ConfigError):
        load_settings(environ={"CARGOHOLD_CONFIG": str(project / "absent.toml")}, cwd=project)


def test_a_configuration_error_is_a_usage_error() -> None:
    assert issubclass(ConfigError, UsageError)
    assert ConfigError.code == "config"


def test_configured_limits_are_the_limits_a_store_enforces(project: Path) -> None:
    settings = load_settings(
        environ={
            "CARGOHOLD_STORE": "memory://",
            "CARGOHOLD_SESSION_OBJECTS": "2",
            "CARGOHOLD_SESSION": "run-1",
        },
        cwd=project,
    )
    assert settings.store is not None
    store = open_store(settings.store, limits=settings.limits)
    scoped = ScopedStore(store, settings.scope())
    scoped.put(b"one")
    scoped.put(b"two")

    with pytest.raises(LimitExceededError) as raised:
        scoped.put(b"three")

    assert raised.value.reason == "session_objects"


def test_the_settings_scope_carries_the_configured_owner_and_attribution(project: Path) -> None:
    settings = load_settings(
        environ={"CARGOHOLD_TENANT": "acme", "CARGOHOLD_USER": "ana", "CARGOHOLD_SESSION": "s"},
        cwd=project,
    )

    scope = settings.scope(task="t-1", agent="a-1")

    assert scope == Scope("acme", "ana", "s", task="t-1", agent="a-1")


@pytest.mark.parametrize("value", [" acme", "ac\nme", "x" * 300])
def test_an_owner_part_no_scope_accepts_is_a_configuration_error(project: Path, value: str) -> None:
    with pytest.raises(ConfigError):
        load_settings(environ={"CARGOHOLD_TENANT": value}, cwd=project)


def test_guard_settings_come_from_the_environment_as_name_number_pairs(project: Path) -> None:
    settings = load_settings(
        environ={"CARGOHOLD_WINDOW_MARGIN": "100", "CARGOHOLD_MODEL_WINDOWS": "acme-1=5000"},
        cwd=project,
    )

    assert settings.window_margin == 100
    assert settings.model_windows == {"acme-1": 5000}


def test_a_malformed_model_windows_variable_is_a_configuration_error(project: Path) -> None:
    with pytest.raises(ConfigError):
        load_settings(environ={"CARGOHOLD_MODEL_WINDOWS": "acme-1"}, cwd=project)


def test_the_settings_repr_names_no_owner_and_no_store_url(project: Path) -> None:
    settings = load_settings(
        {
            "store": "postgresql://ana:hunter2@db.internal/agents",
            "tenant": "tenant-q1",
            "user": "user-q2",
            "session": "session-q3",
        },
        cwd=project,
    )

    shown = repr(settings) + str(settings)
    for secret in ("hunter2", "db.internal", "tenant-q1", "user-q2", "session-q3"):
        assert secret not in shown
    assert settings.store == "postgresql://ana:hunter2@db.internal/agents"


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"colour": "blue"}, "colour"),
        ({"read_budget": 2 * 1024 * 1024}, "read_budget"),
        ({"read_budget": 0}, "read_budget"),
        ({"budget": "huge"}, "budget"),
        ({"heavy_threshold": True}, "heavy_threshold"),
        ({"window_margin": -1}, "window_margin"),
        ({"tool_thresholds": {"fetch": 0}}, "tool_thresholds.fetch"),
        ({"model_windows": {"acme-1": "wide"}}, "model_windows.acme-1"),
        ({"tool_thresholds": 5}, "tool_thresholds"),
        ({"tool_classifications": {"fetch": "compressible"}}, "tool_classifications.fetch"),
        ({"tool_classifications": ["fetch"]}, "tool_classifications"),
        ({"default_ttl": float("nan")}, "default_ttl"),
    ],
)
def test_a_configuration_error_names_the_offending_key(
    project: Path, overrides: dict[str, object], key: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(overrides, environ={}, cwd=project)

    assert str(raised.value).startswith(f"invalid configuration: {key}: ")


@pytest.mark.parametrize(
    ("file", "environ", "overrides", "key"),
    [
        ("heavy_threshold = 1e15\n", {}, {}, "heavy_threshold"),
        ("", {"CARGOHOLD_HEAVY_THRESHOLD": "1000000000000000"}, {}, "heavy_threshold"),
        ("", {}, {"heavy_threshold": 10**15}, "heavy_threshold"),
        ("[tool_thresholds]\nfetch = 1048577\n", {}, {}, "tool_thresholds.fetch"),
        ("", {"CARGOHOLD_TOOL_THRESHOLDS": "fetch=1048577"}, {}, "tool_thresholds.fetch"),
        ("", {}, {"tool_thresholds": {"fetch": 1048577}}, "tool_thresholds.fetch"),
    ],
    ids=["file", "environment", "argument", "tool-file", "tool-environment", "tool-argument"],
)
def test_a_threshold_above_the_largest_read_is_refused_naming_the_setting_and_the_bound(
    project: Path, file: str, environ: dict[str, str], overrides: dict[str, object], key: str
) -> None:
    # 1e15 was accepted and turned offloading off: the guard then let 5 MiB through raw.
    _write(project / "cargohold.toml", file)

    with pytest.raises(ConfigError) as raised:
        load_settings(overrides, environ=environ, cwd=project)

    # The message is the behaviour: the setting to fix and the bound it must keep.
    assert f"{key}: must be at most 1048576 bytes" in str(raised.value)


def test_tool_classifications_are_read_from_the_file_and_the_environment(project: Path) -> None:
    _write(project / "cargohold.toml", '[tool_classifications]\nread_policy = "exact_required"\n')

    from_file = load_settings(environ={}, cwd=project)
    from_env = load_settings(
        environ={"CARGOHOLD_TOOL_CLASSIFICATIONS": "recall=exact_required"}, cwd=project
    )

    assert from_file.tool_classifications == {"read_policy": "exact_required"}
    assert from_env.tool_classifications == {"recall": "exact_required"}


def test_the_tenant_quota_is_unset_by_default_and_configured_from_the_file_or_environment(
    project: Path,
) -> None:
    unset = load_settings(environ={}, cwd=project).limits
    _write(project / "cargohold.toml", "tenant_bytes = 1048576\n")

    configured = load_settings(environ={"CARGOHOLD_TENANT_OBJECTS": "500"}, cwd=project).limits

    assert (unset.tenant_bytes, unset.tenant_objects) == (None, None)
    assert (configured.tenant_bytes, configured.tenant_objects) == (1048576, 500)
    with pytest.raises(ConfigError):
        load_settings({"tenant_objects": 0}, environ={}, cwd=project)


def test_a_threshold_of_exactly_the_largest_read_is_accepted(project: Path) -> None:
    settings = load_settings(
        {"heavy_threshold": 1048576, "tool_thresholds": {"fetch": 1048576}},
        environ={},
        cwd=project,
    )

    assert (settings.heavy_threshold, settings.tool_thresholds) == (1048576, {"fetch": 1048576})


def test_every_problem_of_a_configuration_is_reported_at_once(project: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings({"session_objects": "many", "default_ttl": "soon"}, environ={}, cwd=project)

    assert "session_objects: " in str(raised.value)
    assert "default_ttl: " in str(raised.value)


def test_environment_text_becomes_numbers_and_mappings_of_positive_integers(
    project: Path,
) -> None:
    settings = load_settings(
        environ={
            "CARGOHOLD_READ_BUDGET": " 1048576 ",
            "CARGOHOLD_DEFAULT_TTL": "60.5",
            "CARGOHOLD_BUDGET": "light",
            "CARGOHOLD_TOOL_THRESHOLDS": "fetch=65536, grep = 8192",
        },
        cwd=project,
    )

    assert settings.read_budget == 1024 * 1024
    assert settings.limits.default_ttl == 60.5
    assert settings.budget == "light"
    assert settings.tool_thresholds == {"fetch": 65536, "grep": 8192}


def test_loading_settings_does_not_import_pydantic(project: Path) -> None:
    # pydantic costs every store command of the CLI tens of milliseconds at start-up.
    code = (
        "import sys, cargohold\n"
        "cargohold.load_settings({'session_objects': '3'}, environ={})\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=project
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_sliding_ttl_is_off_unless_configured(project: Path) -> None:
    assert load_settings(environ={}, cwd=project).sliding_ttl is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("1", True), (" TRUE ", True), ("false", False), ("0", False)],
)
def test_sliding_ttl_is_read_from_the_environment_as_true_false_1_or_0(
    project: Path, value: str, expected: bool
) -> None:
    settings = load_settings(environ={"CARGOHOLD_SLIDING_TTL": value}, cwd=project)

    assert settings.sliding_ttl is expected


def test_sliding_ttl_follows_the_usual_precedence(project: Path) -> None:
    _write(project / "cargohold.toml", "sliding_ttl = true\n")

    assert load_settings(environ={}, cwd=project).sliding_ttl is True
    env = {"CARGOHOLD_SLIDING_TTL": "false"}
    assert load_settings(environ=env, cwd=project).sliding_ttl is False
    explicit = load_settings({"sliding_ttl": True}, environ=env, cwd=project)
    assert explicit.sliding_ttl is True


@pytest.mark.parametrize("text", ["sliding_ttl = 1", "sliding_ttl = 'yes'"])
def test_a_sliding_ttl_that_is_not_a_boolean_is_a_configuration_error(
    project: Path, text: str
) -> None:
    _write(project / "cargohold.toml", text + "\n")

    with pytest.raises(ConfigError) as raised:
        load_settings(environ={}, cwd=project)

    assert "sliding_ttl: " in str(raised.value)


@pytest.mark.parametrize("value", ["yes", "on", "2"])
def test_a_sliding_ttl_variable_other_than_true_false_1_or_0_is_a_configuration_error(
    project: Path, value: str
) -> None:
    with pytest.raises(ConfigError):
        load_settings(environ={"CARGOHOLD_SLIDING_TTL": value}, cwd=project)


# -- what a configuration file may be -----------------------------------------------------------


def _cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """The console script's entry point in a child (a file read forever must not hang the run)."""
    code = "import sys\nfrom cargohold.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**environ, **(env or {})},
        cwd=cwd,
        check=False,
    )


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_configuration_file_that_is_a_device_is_refused_without_reading_it(
    project: Path, how: str
) -> None:
    # /dev/zero was read without bound (the CLI grew until it was killed).
    if how == "option":
        done = _cli("--config", "/dev/zero", "ls", cwd=project)
    else:
        done = _cli("ls", env={"CARGOHOLD_CONFIG": "/dev/zero"}, cwd=project)

    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    with pytest.raises(ConfigError):
        load_settings(environ={}, cwd=project, config_file="/dev/zero")


def test_a_configuration_file_that_is_a_fifo_is_refused_without_waiting_for_a_writer(
    project: Path,
) -> None:
    fifo = project / "cargohold.fifo"
    os.mkfifo(fifo)

    done = _cli("--config", str(fifo), "ls", cwd=project)

    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_a_configuration_file_over_the_size_bound_is_refused(project: Path) -> None:
    big = _write(project / "big.toml", "# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))

    with pytest.raises(ConfigError):
        load_settings(environ={}, cwd=project, config_file=big)
    smaller = _write(project / "small.toml", "# padding\n" * (MAX_CONFIG_BYTES // 10 - 1))
    assert load_settings(environ={}, cwd=project, config_file=smaller).source == smaller


def test_a_configuration_file_that_is_not_utf8_is_a_config_error(project: Path) -> None:
    bad = project / "cargohold.toml"
    bad.write_bytes(b'tenant = "\xff\xfe"\n')

    with pytest.raises(ConfigError):
        load_settings(environ={}, cwd=project)


def _nested(depth: int, kind: str) -> str:
    if kind == "array":
        return "tool_thresholds = " + "[" * depth + "]" * depth + "\n"
    return "tool_thresholds = " + "{a = " * depth + '"x"' + "}" * depth + "\n"


@examples(max_examples=30, deadline=None)
@given(depth=st.integers(1, 100_000), kind=st.sampled_from(["array", "table"]))
def test_a_configuration_nested_to_any_depth_is_a_config_error_never_a_recursion_error(
    tmp_path_factory: pytest.TempPathFactory, depth: int, kind: str
) -> None:
    folder = tmp_path_factory.mktemp("nested")
    _write(folder / "cargohold.toml", _nested(depth, kind))

    with pytest.raises(ConfigError):  # too deep for the parser, or not a table of thresholds
        load_settings(environ={}, cwd=folder)


def test_the_cli_answers_a_100000_deep_configuration_with_a_usage_error(project: Path) -> None:
    deep = _write(project / "deep.toml", _nested(100_000, "array"))

    done = _cli("--config", str(deep), "ls", cwd=project)

    assert done.returncode == 2, done.stderr[-2000:]
    assert "RecursionError" not in done.stderr


# -- layering -----------------------------------------------------------------------------------


def _imported_modules(path: Path) -> set[str]:
    """Every module a source file imports, wherever the import sits (a function, a
    ``TYPE_CHECKING`` block), resolved to absolute names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_store_layer_imports_no_configuration() -> None:
    # store/__init__ imported _config (for open_store(None)) while _config imported the store:
    # a cycle. The store is the lowest layer; the configured store is cargohold.open_store's.
    store_dir = Path(cargohold_store.__file__).parent
    for source in sorted(store_dir.glob("*.py")):
        assert "cargohold._config" not in _imported_modules(source), source.name


def test_opening_a_store_by_url_loads_no_configuration(project: Path) -> None:
    code = (
        "import sys\n"
        "from cargohold.store import open_store\n"
        "open_store('memory://').close()\n"
        "print('cargohold._config' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=project
    )

    assert done.stdout.strip() == "False", done.stderr[-2000:]


def test_the_top_level_open_store_reads_the_configuration_the_store_level_one_does_not(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_STORE", "memory://")
    monkeypatch.setenv("XDG_CACHE_HOME", str(project / "cache"))

    configured = cargohold.open_store()
    embedded = cargohold_store.open_store()

    assert isinstance(configured, cargohold.MemoryStore)
    assert isinstance(embedded, cargohold.LocalStore)  # the embedded default, under the cache
    configured.close()
    embedded.close()
