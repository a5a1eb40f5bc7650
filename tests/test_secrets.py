"""Credentials on the way in: found, refused by default, masked when a tool's policy allows.

Every credential here is a fake built in the test from random bytes with the right shape (never a
real key, and no literal key in this file): a PEM block of random base64 lines, ``AKIA`` and
sixteen random characters, a JWT whose parts are random JSON, and so on. Each test checks that no
value shows up where the model, an operator or a log could see it: the stub, the notice, the
event (repr, str, ``as_dict``), the JSON-lines and logging sinks, and error messages.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import logging
import random
import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cargohold import (
    ConfigError,
    JsonLinesSink,
    ListSink,
    LocalStore,
    LoggingSink,
    MemoryStore,
    Offloader,
    OffloadOutcome,
    OffloadResult,
    Reason,
    Ref,
    RehydrateOutcome,
    Rehydrator,
    Reporter,
    Scope,
    ScopedStore,
    SecretFinding,
    SecretKind,
    Sensitivity,
    StoreBackend,
    StoreUnavailableError,
    Usage,
    UsageError,
    find_secrets,
    load_settings,
    mask_secrets,
    render_stub,
)
from cargohold._secrets import describe_findings, redact_secrets, screen_bytes, screen_text
from cargohold.testing import FakeClock
from code_fixtures import CODE_FIXTURES

OWNER = Scope("tenant-acme", "user-ana", "session-1")
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
KiB = 1024

ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
B64URL = ALNUM + "-_"


# -- fakes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fake:
    """A generated credential as it would appear in a tool's output.

    Attributes:
        text: The text holding it (possibly several lines).
        kinds: The kinds a detector must report for it, in order.
        values: Substrings that must never be shown (each secret part, each key line).
    """

    text: str
    kinds: tuple[SecretKind, ...]
    values: tuple[str, ...]


def _chars(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _pem(rng: random.Random, label: str, headers: str = "", width: int = 64) -> Fake:
    lines = [base64.b64encode(rng.randbytes(width * 3 // 4)).decode() for _ in range(12)]
    text = f"-----BEGIN {label}-----\n{headers}" + "\n".join(lines) + f"\n-----END {label}-----"
    return Fake(text, (SecretKind.PRIVATE_KEY,), tuple(lines))


def _jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"sub": _chars(rng, ALNUM, 12), "iat": rng.randrange(1 << 31)}
    return f"{header}.{_b64url(json.dumps(claims).encode())}.{_b64url(rng.randbytes(32))}"


def _single(kind: SecretKind, value: str, text: str | None = None) -> Fake:
    return Fake(value if text is None else text, (kind,), (value,))


def _aws_pair(rng: random.Random) -> Fake:
    key_id = "AKIA" + _chars(rng, UPPER_ALNUM, 16)
    secret = _chars(rng, ALNUM, 38) + "/+"
    return Fake(
        f"{key_id},{secret}",
        (SecretKind.AWS_ACCESS_KEY_ID, SecretKind.AWS_SECRET_ACCESS_KEY),
        (key_id, secret),
    )


def _basic(rng: random.Random) -> Fake:
    credential = base64.b64encode(f"svc-{_chars(rng, ALNUM, 6)}:{_chars(rng, ALNUM, 14)}".encode())
    value = credential.decode()
    return _single(SecretKind.AUTHORIZATION_HEADER, value, f"Authorization: Basic {value}")


def _url(rng: random.Random) -> Fake:
    password = _chars(rng, ALNUM, 18)
    text = f"postgresql://svc_app:{password}@db-7.internal:5432/orders"
    return _single(SecretKind.URL_CREDENTIALS, password, text)


FAKES: dict[str, Callable[[random.Random], Fake]] = {
    "rsa_private_key": lambda rng: _pem(rng, "RSA PRIVATE KEY"),
    "ec_private_key": lambda rng: _pem(rng, "EC PRIVATE KEY"),
    "pkcs8_private_key": lambda rng: _pem(rng, "PRIVATE KEY"),
    "openssh_private_key": lambda rng: _pem(rng, "OPENSSH PRIVATE KEY", width=70),
    "encrypted_pem": lambda rng: _pem(
        rng,
        "RSA PRIVATE KEY",
        f"Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{rng.randbytes(16).hex().upper()}\n\n",
    ),
    "pgp_private_key": lambda rng: _pem(rng, "PGP PRIVATE KEY BLOCK", "Version: GnuPG v2\n\n"),
    "aws_akia": lambda rng: _single(
        SecretKind.AWS_ACCESS_KEY_ID, "AKIA" + _chars(rng, UPPER_ALNUM, 16)
    ),
    "aws_asia": lambda rng: _single(
        SecretKind.AWS_ACCESS_KEY_ID, "ASIA" + _chars(rng, UPPER_ALNUM, 16)
    ),
    "aws_secret_named": lambda rng: (
        lambda secret: _single(
            SecretKind.AWS_SECRET_ACCESS_KEY, secret, f"aws_secret_access_key = {secret}"
        )
    )(_chars(rng, ALNUM, 39) + "/"),
    "aws_secret_json": lambda rng: (
        lambda secret: _single(
            SecretKind.AWS_SECRET_ACCESS_KEY, secret, f'"SecretAccessKey": "{secret}",'
        )
    )(_chars(rng, ALNUM, 39) + "+"),
    "aws_pair": _aws_pair,
    "jwt": lambda rng: _single(SecretKind.JWT, _jwt(rng)),
    **{
        f"github_{prefix}": (
            lambda rng, prefix=prefix: _single(
                SecretKind.GITHUB_TOKEN, f"{prefix}_" + _chars(rng, ALNUM, 36)
            )
        )
        for prefix in ("ghp", "gho", "ghu", "ghs", "ghr")
    },
    "github_pat": lambda rng: _single(
        SecretKind.GITHUB_TOKEN,
        "github_pat_" + _chars(rng, ALNUM, 22) + "_" + _chars(rng, ALNUM, 59),
    ),
    "slack_bot": lambda rng: _single(
        SecretKind.SLACK_TOKEN,
        f"xoxb-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-"
        + _chars(rng, ALNUM, 24),
    ),
    "slack_user": lambda rng: _single(
        SecretKind.SLACK_TOKEN,
        f"xoxp-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**11, 10**12)}-"
        f"{rng.randrange(10**12, 10**13)}-{rng.randbytes(16).hex()}",
    ),
    "slack_webhook": lambda rng: _single(
        SecretKind.SLACK_WEBHOOK,
        f"https://hooks.slack.com/services/T{_chars(rng, UPPER_ALNUM, 8)}/"
        f"B{_chars(rng, UPPER_ALNUM, 10)}/{_chars(rng, ALNUM, 24)}",
    ),
    "stripe_secret": lambda rng: _single(
        SecretKind.STRIPE_LIVE_KEY, "sk_" + "live_" + _chars(rng, ALNUM, 24)
    ),
    "stripe_restricted": lambda rng: _single(
        SecretKind.STRIPE_LIVE_KEY, "rk_" + "live_" + _chars(rng, ALNUM, 32)
    ),
    "google_api_key": lambda rng: _single(
        SecretKind.GOOGLE_API_KEY, "AI" + "za" + _chars(rng, B64URL, 35)
    ),
    "openai_user_key": lambda rng: _single(
        SecretKind.OPENAI_API_KEY,
        "sk-" + _chars(rng, ALNUM, 20) + "T3Blbk" + "FJ" + _chars(rng, ALNUM, 20),
    ),
    "openai_project_key": lambda rng: _single(
        SecretKind.OPENAI_API_KEY, "sk-" + "proj-" + _chars(rng, B64URL, 120)
    ),
    "anthropic_api_key": lambda rng: _single(
        SecretKind.ANTHROPIC_API_KEY, "sk-" + "ant-api03-" + _chars(rng, B64URL, 93) + "AA"
    ),
    "bearer_header": lambda rng: (
        lambda token: _single(
            SecretKind.AUTHORIZATION_HEADER, token, f"Authorization: Bearer {token}"
        )
    )(_chars(rng, ALNUM, 40)),
    "bearer_jwt_json_header": lambda rng: (
        lambda token: _single(
            SecretKind.AUTHORIZATION_HEADER, token, f'"authorization": "Bearer {token}"'
        )
    )(_jwt(rng)),
    "token_header": lambda rng: (
        lambda token: _single(
            SecretKind.AUTHORIZATION_HEADER, token, f"Authorization: token {token}"
        )
    )(rng.randbytes(20).hex()),
    "basic_header": _basic,
    "url_credentials": _url,
    "gitlab_pat": lambda rng: _single(
        SecretKind.GITLAB_TOKEN, "gl" + "pat-" + _chars(rng, B64URL, 20)
    ),
    "gitlab_routable_pat": lambda rng: _single(
        SecretKind.GITLAB_TOKEN,
        "gl" + "pat-" + _chars(rng, B64URL, 27) + ".01." + _chars(rng, string.digits + "abc", 9),
    ),
    "gitlab_deploy_token": lambda rng: _single(
        SecretKind.GITLAB_TOKEN, "gl" + "dt-" + _chars(rng, B64URL, 20)
    ),
    "npm_token": lambda rng: _single(SecretKind.NPM_TOKEN, "np" + "m_" + _chars(rng, ALNUM, 36)),
    "azure_storage_key": lambda rng: (
        lambda key: _single(
            SecretKind.AZURE_STORAGE_KEY,
            key,
            "DefaultEndpointsProtocol=https;AccountName=acmelogs;Account"
            f"Key={key};EndpointSuffix=core.windows.net",
        )
    )(base64.b64encode(rng.randbytes(64)).decode()),
}


def _fake(name: str, seed: int = 0) -> Fake:
    return FAKES[name](random.Random(f"{name}-{seed}"))


def _normal_line(rng: random.Random, index: int) -> str:
    level = "WARN" if index % 97 == 0 else "INFO"
    return (
        f"2026-03-01T10:{index // 60 % 60:02d}:{index % 60:02d}Z {level}"
        f" [worker-{rng.randint(1, 8)}] request id=req-{rng.randrange(16**12):012x}"
        f" path=/api/v2/orders/{index}"
        f" status=200 latency_ms={rng.randint(3, 900)}\n"
    )


@dataclass(frozen=True)
class SecretLog:
    """A log of a few hundred KB with every fake among ordinary lines."""

    text: str
    lines: dict[SecretKind, list[int]]
    values: tuple[str, ...]

    @property
    def data(self) -> bytes:
        return self.text.encode()


def _secret_log(size: int = 300 * KiB, seed: int = 7) -> SecretLog:
    rng = random.Random(seed)
    fakes = [_fake(name, seed) for name in FAKES]
    normal: list[str] = []
    total = 0
    while total < size:
        line = _normal_line(rng, len(normal))
        normal.append(line)
        total += len(line)
    # Spread the fakes over the whole log, each in an ERROR line (quoted by a log preview).
    spots = sorted(rng.sample(range(1, len(normal)), len(fakes)))
    out: list[str] = []
    lines: dict[SecretKind, list[int]] = {}
    at = 0
    for spot, fake in zip(spots, fakes, strict=True):
        out.extend(normal[at:spot])
        at = spot
        number = sum(chunk.count("\n") for chunk in out) + 1
        out.append(f"2026-03-01T11:00:00Z ERROR [worker-3] upstream replied: {fake.text}\n")
        for kind in fake.kinds:
            lines.setdefault(kind, [])
            if number not in lines[kind]:
                lines[kind].append(number)
    out.extend(normal[at:])
    values = tuple(value for fake in fakes for value in fake.values)
    return SecretLog("".join(out), lines, values)


def _assert_shows_no_value(text: str, values: tuple[str, ...]) -> None:
    for value in values:
        assert value not in text
        # nor its distinctive middle (a value must not leak in pieces either)
        middle = value[len(value) // 4 : len(value) // 4 + 16]
        if len(middle) == 16:
            assert middle not in text


# -- the detector -----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FAKES))
def test_each_kind_is_found_with_its_line_and_byte_span(name: str) -> None:
    fake = _fake(name)
    head = "2026-03-01 INFO starting\n2026-03-01 INFO connecting\n"
    data = f"{head}2026-03-01 DEBUG got {fake.text} from upstream\nINFO done\n".encode()

    findings = find_secrets(data)

    assert [finding.kind for finding in findings] == list(fake.kinds)
    assert {finding.line for finding in findings} == {3}
    spans = b"".join(data[finding.start : finding.end] for finding in findings)
    for value in fake.values:
        assert value.encode() in spans


@pytest.mark.parametrize("name", sorted(FAKES))
def test_each_kind_is_found_inside_a_json_string(name: str) -> None:
    fake = _fake(name, seed=1)
    data = json.dumps({"response": {"body": fake.text, "status": 200}}).encode()

    findings = find_secrets(data)

    assert [finding.kind for finding in findings] == list(fake.kinds)
    masked = mask_secrets(data, findings)
    assert json.loads(masked)["response"]["status"] == 200  # still the same JSON document
    _assert_shows_no_value(masked.decode(), fake.values)


def test_a_finding_names_kind_line_and_span_but_never_the_value() -> None:
    fake = _fake("github_ghp")
    data = f"token in use:\n{fake.text}\n".encode()

    (finding,) = find_secrets(data)

    assert finding == SecretFinding(SecretKind.GITHUB_TOKEN, 2, 14, 14 + len(fake.text))
    assert finding.span == (14, 14 + len(fake.text))
    _assert_shows_no_value(repr(finding) + str(finding), fake.values)


def test_a_credential_written_as_a_url_user_name_is_found_despite_a_short_password() -> None:
    token = _fake("github_ghs").text
    data = f"remote: https://{token}:x@github.com/acme/app.git\n".encode()

    assert [f.kind for f in find_secrets(data)] == [SecretKind.GITHUB_TOKEN]


NEAR_MISSES = {
    "placeholder bearer": "Authorization: Bearer <your-token-here>",
    "templated bearer": 'headers = {"Authorization": f"Bearer {token}"}',
    "env bearer": "curl -H 'Authorization: Bearer ${API_TOKEN}' https://api.example.com",
    "zero token": '"authorization": "token 0000000000000000000000000000000000000001",',
    "words as a token": "Authorization: Bearer not-a-real-token-at-all",
    "short url password": "store = postgresql://ana:hunter2@db.internal/agents",
    "templated url password": 'url = f"postgresql://{user}:{password}@127.0.0.1:5432/db"',
    "placeholder url password": "redis://default:password@cache:6379/0",
    "phrase url password": "https://jo%40email.com:a%20secret@example.org/",
    "masked url password": "postgresql://app:********@db:5432/app",
    "key header in prose": "Paste the block that starts with -----BEGIN RSA PRIVATE KEY----- here.",
    "lower-case akia": "akiaabcdefghijklmnop is not an access key id",
    "akia inside a word": "XAKIA" + "ABCDEFGHIJKLMNOP" + "QRST",
    "eyJ without a JSON header": "eyJ" + "A" * 20 + ".eyJ" + "B" * 20 + "." + "C" * 30,
    "sha256 hex": "sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "uuid": "request 123e4567-e89b-12d3-a456-426614174000 done",
    "npm integrity": '"integrity": "sha512-'
    + base64.b64encode(random.Random(1).randbytes(64)).decode()
    + '"',
    "test sk- name": "def test_sk-learn-compat(): pass",
    "stripe test key": "sk_" + "test_" + _chars(random.Random(2), ALNUM, 24),
    "aws secret without mixed classes": "aws_secret_access_key = " + "a" * 40,
    "placeholder gitlab token": "token: gl" + "pat-xxxxxxxxxxxxxxxxxxxx",
    "npm variable name": "npm_config_cache=/home/ana/.npm npm_package_version=1.2.3",
    "npm word": "see npm_" + "a" * 36 + " for details",
    # The storage emulator's documented key (Azurite): public, compiled into client libraries.
    "azurite connection string": "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "Account" + "Key=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr"
    "/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;",
    "rfc 6749 example client": "Authorization: Basic czZCaGRSa3F0Mzpn" + "WDFmQmF0M2JW",
    "templated password": "DB_PASSWORD=${DB_PASSWORD}\nSECRET_KEY={{ secret_key }}",
    "password from code": 'SECRET_KEY = os.environ["SECRET_KEY"]\nPASSWORD = get_password()',
    "password hasher class": "PASSWORD_HASHERS=django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "password file path": "PASSWORD_FILE=/run/secrets/db_password\nSECRET_NAME=prod-db-creds",
    "placeholder password": "password=changeme123\nDB_PASSWORD=your_password",
    "password keyword argument": "    connect(host, password=password, timeout=30)",
    "password in prose": "set the password=<something long> before starting",
    "short password": "password=hunter2",
    "password words": "password=correcthorsebatterystaple",
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_lookalikes_that_are_not_credentials_raise_no_alarm(name: str) -> None:
    assert find_secrets(NEAR_MISSES[name].encode()) == []


ASSIGNMENTS = {
    "dotenv": "DB_PASSWORD={value}",
    "dotenv quoted": 'CLIENT_SECRET="{value}"',
    "shell export": "export SECRET_KEY='{value}'",
    "properties": "spring.datasource.password={value}",
    "ini": "password = {value}",
}


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_a_password_or_secret_assigned_on_its_own_line_is_found_and_only_its_value(
    name: str,
) -> None:
    value = _chars(random.Random(name), ALNUM, 20) + "#%-!"
    line = ASSIGNMENTS[name].format(value=value)
    data = f"APP_ENV=production\nPORT=8080\n{line}\nLOG_LEVEL=info\n".encode()

    (finding,) = find_secrets(data)

    assert (finding.kind, finding.line) == (SecretKind.SECRET_ASSIGNMENT, 3)
    assert data[finding.start : finding.end] == value.encode()
    redacted = redact_secrets(data, [finding]).decode()
    assert redacted.splitlines()[2] == line.replace(value, "[REDACTED:secret_assignment]")
    assert value not in redacted


def test_an_env_file_inside_a_json_string_is_found_line_by_line() -> None:
    rng = random.Random(4)
    values = [_chars(rng, ALNUM, 24) for _ in range(2)]
    env = f"PORT=8080\nDB_PASSWORD={values[0]}\nexport API_SECRET={values[1]}\n"
    data = json.dumps({"path": ".env", "content": env}).encode()

    findings = find_secrets(data)

    assert [f.kind for f in findings] == [SecretKind.SECRET_ASSIGNMENT] * 2
    redacted = json.loads(redact_secrets(data, findings))["content"]
    assert redacted.splitlines() == [
        "PORT=8080",
        "DB_PASSWORD=[REDACTED:secret_assignment]",
        "export API_SECRET=[REDACTED:secret_assignment]",
    ]


def _heavy_json_text(fake: Fake, size: int = 40 * KiB) -> str:
    """Heavy JSON text (a tool's JSON output, as text) with the credential in one record."""
    records = [{"id": i, "note": "ok " * 30} for i in range(size // 110)]
    records[len(records) // 2] = {"id": -1, "key": fake.text}
    return json.dumps(records)


def _wrapped(text: str, layers: int) -> str:
    for _ in range(layers):  # what MCPServer sends for a str result: {"result": text}
        text = json.dumps({"result": text})
    return text


def _unwrapped(text: str, layers: int) -> Any:
    value: Any = text
    for _ in range(layers):
        value = json.loads(value)["result"]
    return json.loads(value)


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("name", ["rsa_private_key", "ec_private_key", "openssh_private_key"])
def test_a_key_in_json_text_escaped_again_and_again_is_found_and_redacted(
    name: str, layers: int
) -> None:
    fake = _fake(name, seed=layers)
    data = _wrapped(_heavy_json_text(fake), layers).encode()

    findings = find_secrets(data)

    assert [f.kind for f in findings] == [SecretKind.PRIVATE_KEY]
    redacted = redact_secrets(data, findings)
    _assert_shows_no_value(redacted.decode(), fake.values)
    records = _unwrapped(redacted.decode(), layers)  # still the same JSON, layer by layer
    assert [r for r in records if r["id"] == -1] == [{"id": -1, "key": "[REDACTED:private_key]"}]


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(FAKES))
def test_every_kind_on_its_own_line_of_a_json_string_wrapped_again_is_found_and_redacted(
    name: str, layers: int
) -> None:
    fake = _fake(name, seed=layers)
    text = json.dumps({"log": f"starting\n{fake.text}\r\n\tdone"})
    data = _wrapped(text, layers).encode()

    findings = find_secrets(data)

    assert [f.kind for f in findings] == list(fake.kinds)
    redacted = redact_secrets(data, findings).decode()
    _assert_shows_no_value(redacted, fake.values)
    log = _unwrapped(redacted, layers)["log"]  # every layer still parses
    assert log.startswith("starting\n")
    assert log.endswith("\r\n\tdone")
    assert log.count("[REDACTED:") == len(fake.kinds)


@pytest.mark.parametrize("name", ["aws_akia", "github_ghp", "jwt", "npm_token", "gitlab_pat"])
def test_a_token_at_the_start_of_an_escaped_line_is_found(name: str) -> None:
    fake = _fake(name, seed=9)
    text = json.dumps({"log": f"starting\n{fake.text}\n\tdone"})

    for layers in (0, 1, 2):
        data = _wrapped(text, layers).encode()
        findings = find_secrets(data)
        assert [f.kind for f in findings] == list(fake.kinds)
        assert redact_secrets(data, findings).count(b"[REDACTED:") == len(fake.kinds)
        (value,) = fake.values
        assert data[findings[0].start : findings[0].end] == value.encode()


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("redact", "name: build-7 [REDACTED:github_token]"),
        ("mask", None),  # same length, checked below
        ("reject", None),
    ],
)
def test_a_string_that_reaches_a_model_unstored_is_screened_under_its_policy(
    policy: str, expected: str | None
) -> None:
    fake = _fake("github_ghp", seed=43)
    text = f"name: build-7 {fake.text}"

    screened = screen_text(text, policy)

    assert screen_text("name: build-7", policy) == "name: build-7"
    if policy == "redact":
        assert screened == expected
    elif policy == "mask":
        assert screened is not None
        assert len(screened) == len(text)
        assert screened.startswith("name: build-7 [masked:github_token]")
    else:
        assert screened is None
    _assert_shows_no_value(str(screened), fake.values)


def test_bytes_a_surface_stores_itself_are_screened_under_its_policy() -> None:
    fake = _fake("aws_akia", seed=44)
    data = f"id,key\n1,{fake.text}\n".encode()

    redacted = screen_bytes(data)
    masked = screen_bytes(data, "mask")
    rejected = screen_bytes(data, "reject")

    assert redacted.data == b"id,key\n1,[REDACTED:aws_access_key_id]\n"
    assert redacted.redacted
    assert [(f.kind, f.line) for f in redacted.findings] == [(SecretKind.AWS_ACCESS_KEY_ID, 2)]
    assert (masked.data, masked.redacted) == (data, False)  # stored exact, as restricted
    assert rejected.data is None
    assert screen_bytes(b"id,key\n").data == b"id,key\n"
    _assert_shows_no_value(repr(redacted) + repr(rejected), fake.values)
    with pytest.raises(ValueError, match="secrets policy"):
        screen_bytes(data, "allow")


def _corpus_files() -> Iterator[tuple[str, bytes]]:
    if CORPUS.is_dir():
        for path in sorted(CORPUS.iterdir()):
            if path.is_file():
                yield path.name, path.read_bytes()
    for name, fixture in sorted(CODE_FIXTURES.items()):
        yield name, fixture.read()


def test_the_corpus_and_the_code_fixtures_raise_no_alarm() -> None:
    scanned = dict(_corpus_files())
    assert len(scanned) >= len(CODE_FIXTURES)

    alarms = {name: describe_findings(find_secrets(data)) for name, data in scanned.items()}

    assert {name: text for name, text in alarms.items() if text} == {}


def test_the_corpus_and_the_code_fixtures_escaped_in_json_once_or_twice_raise_no_alarm() -> None:
    # The escape-tolerant rules see every text as an MCP server's structuredContent would
    # carry it ({"result": text}, and that again): still no alarm.
    alarms = {}
    for name, data in _corpus_files():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:  # binary: never carried as a JSON string
            continue
        for layers in (1, 2):
            findings = find_secrets(_wrapped(text, layers).encode())
            if findings:
                alarms[f"{name} x{layers}"] = describe_findings(findings)

    assert alarms == {}


def test_random_binary_and_base64_raise_no_alarm() -> None:
    raw = random.Random(3).randbytes(2 * 1024 * KiB)

    assert find_secrets(raw) == []
    assert find_secrets(base64.encodebytes(raw)) == []
    assert find_secrets(base64.b64encode(raw)) == []


def test_a_truncated_key_block_is_masked_to_the_end_of_its_run() -> None:
    body = base64.encodebytes(random.Random(5).randbytes(600 * KiB))
    data = b"-----BEGIN OPENSSH PRIVATE KEY-----\n" + body

    (finding,) = find_secrets(data)

    assert (finding.kind, finding.start, finding.end) == (SecretKind.PRIVATE_KEY, 0, len(data))
    masked = mask_secrets(data)
    label = b"[masked:private_key]"
    assert masked.startswith(label)
    assert set(masked[len(label) :]) == set(b"*\n")


def test_masking_keeps_length_lines_and_every_other_byte() -> None:
    log = _secret_log(64 * KiB)
    data = log.data
    findings = find_secrets(data)

    masked = mask_secrets(data, findings)

    assert len(masked) == len(data)
    assert masked.count(b"\n") == data.count(b"\n")
    assert [i for i, b in enumerate(masked) if b == 10] == [
        i for i, b in enumerate(data) if b == 10
    ]
    inside = {i for f in findings for i in range(f.start, f.end)}
    assert all(masked[i] == data[i] for i in range(len(data)) if i not in inside)
    assert b"[masked:private_key]" in masked
    assert find_secrets(masked) == []
    _assert_shows_no_value(masked.decode(), log.values)


_FRAGMENTS = st.sampled_from(sorted(FAKES)).flatmap(
    lambda name: st.integers(0, 1000).map(lambda seed: _fake(name, seed).text)
)
_FILLER = st.text(alphabet=string.ascii_letters + string.digits + " =:/\"'@.,-_\n", max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_FRAGMENTS, _FILLER), max_size=12))
def test_after_masking_nothing_is_left_to_find_and_nothing_else_moves(parts: list[str]) -> None:
    data = " ".join(parts).encode()
    findings = find_secrets(data)

    masked = mask_secrets(data, findings)

    assert len(masked) == len(data)
    assert [i for i, b in enumerate(masked) if b in (10, 13)] == [
        i for i, b in enumerate(data) if b in (10, 13)
    ]
    assert find_secrets(masked) == []
    assert findings == sorted(findings, key=lambda f: f.start)
    assert all(a.end <= b.start for a, b in itertools.pairwise(findings))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_FRAGMENTS, _FILLER), max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_after_redacting_nothing_is_left_to_find_and_every_line_keeps_its_number(
    parts: list[str], newline: str
) -> None:
    data = " ".join(parts).replace("\n", newline).encode()
    findings = find_secrets(data)

    redacted = redact_secrets(data, findings)

    assert find_secrets(redacted) == []
    assert redacted.count(b"\n") == data.count(b"\n")
    assert redacted.count(b"[REDACTED:") == len(findings)
    # Every line no credential touched is the same line, at the same number.
    touched = {
        n for f in findings for n in range(f.line, f.line + data.count(b"\n", f.start, f.end) + 1)
    }
    before, after = data.split(b"\n"), redacted.split(b"\n")
    assert [line for n, line in enumerate(after, 1) if n not in touched] == [
        line for n, line in enumerate(before, 1) if n not in touched
    ]
    assert redact_secrets(redacted) == redacted
    kept = redact_secrets(data, findings, keep_length=True)
    assert len(kept) == len(data)
    assert find_secrets(kept) == []


def test_a_description_names_every_kind_and_at_most_twenty_line_numbers() -> None:
    findings: list[SecretFinding] = []
    line = 0
    for index, kind in enumerate(SecretKind):
        for _ in range(6 if index < 4 else 1):  # four kinds use up the twenty numbers
            line += 1
            findings.append(SecretFinding(kind, line, line * 100, line * 100 + 20))

    text = describe_findings(findings)

    assert text.startswith(
        "private_key (lines 1, 2, 3, 4, 5 and 1 more), "
        "aws_access_key_id (lines 7, 8, 9, 10, 11 and 1 more), "
    )
    for kind in list(SecretKind)[4:]:
        assert f"{kind.value} (1 line)" in text  # counted, not numbered
    assert len(text) < 700


# -- the offload seam ----------------------------------------------------------------------


@pytest.fixture(params=["memory", "local"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    store: StoreBackend
    if request.param == "memory":
        store = MemoryStore(clock=FakeClock())
    else:
        store = LocalStore(tmp_path / "store", clock=FakeClock())
    yield store
    store.close()


@pytest.fixture
def scoped(backend: StoreBackend) -> ScopedStore:
    return ScopedStore(backend, OWNER)


def _observed(
    scoped: ScopedStore, caplog: pytest.LogCaptureFixture, **kwargs: Any
) -> tuple[Offloader, ListSink, io.StringIO]:
    """An offloader reporting to every kind of sink: a list, JSON lines, and logging."""
    caplog.set_level(logging.DEBUG, logger="cargohold.events")
    sink = ListSink()
    stream = io.StringIO()
    reporter = Reporter([sink, JsonLinesSink(stream), LoggingSink(level=logging.INFO)])
    return Offloader(scoped, reporter=reporter, **kwargs), sink, stream


def _assert_nowhere(
    result: OffloadResult,
    stream: io.StringIO,
    caplog: pytest.LogCaptureFixture,
    values: tuple[str, ...],
) -> None:
    """No value in what enters the conversation, the event, or any sink's output."""
    seen = [
        result.text,
        repr(result),
        repr(result.event),
        str(result.event),
        json.dumps(result.event.as_dict()),
        stream.getvalue(),
        *(record.getMessage() for record in caplog.records),
        *(repr(record.__dict__) for record in caplog.records),
    ]
    if result.stub is not None:
        seen += [result.stub.text, repr(result.stub)]
    for text in seen:
        _assert_shows_no_value(text, values)


def _listed_lines(notice: str) -> dict[str, list[int]]:
    listed: dict[str, list[int]] = {}
    for kind, numbers in re.findall(
        r"([a-z0-9_]+) \(lines? ([\d, ]+?)(?: and [\d,]+ more)?\)", notice
    ):
        listed[kind] = [int(n.replace(",", "")) for n in numbers.split(", ")]
    return listed


def _marker_lines(data: bytes) -> dict[str, list[int]]:
    """Where each ``[REDACTED:<kind>]`` marker sits: kind -> 1-based line numbers."""
    found: dict[str, list[int]] = {}
    for number, line in enumerate(data.split(b"\n"), start=1):
        for kind in re.findall(rb"\[REDACTED:([a-z0-9_]+)\]", line):
            lines = found.setdefault(kind.decode(), [])
            if number not in lines:
                lines.append(number)
    return found


def test_by_default_a_log_holding_credentials_is_offloaded_with_each_one_redacted(
    scoped: ScopedStore, caplog: pytest.LogCaptureFixture
) -> None:
    log = _secret_log()
    offloader, sink, stream = _observed(scoped, caplog, threshold=32 * KiB)

    result = offloader.offload(log.text, tool="tail_log")

    assert result.outcome is OffloadOutcome.OFFLOADED
    assert result.reason is Reason.CREDENTIAL_REDACTED
    assert result.event.reason.value == "credential_redacted"
    assert sink.events == [result.event]
    assert result.ref is not None
    assert result.event.ref == str(result.ref)
    assert result.event.observed_bytes == len(log.data)
    stored = scoped.read(result.ref).raise_for_outcome()
    # No credential entered the store; every other line is the log's own, at its own number.
    _assert_shows_no_value(stored.decode(), log.values)
    assert find_secrets(stored) == []
    assert result.ref == Ref.of(stored)
    assert stored.count(b"\n") == log.data.count(b"\n")
    assert _marker_lines(stored) == {kind.value: lines for kind, lines in log.lines.items()}
    touched = {
        number
        for f in find_secrets(log.data)
        for number in range(f.line, f.line + log.data.count(b"\n", f.start, f.end) + 1)
    }
    before, after = log.text.split("\n"), stored.decode().split("\n")
    assert [after[i] for i in range(len(after)) if i + 1 not in touched] == [
        before[i] for i in range(len(before)) if i + 1 not in touched
    ]
    # The result says what was redacted (kinds and lines, never values).
    assert {f.kind for f in result.redacted} == set(log.lines)
    assert all(f.line in log.lines[f.kind] for f in result.redacted)
    assert result.stub is not None
    _assert_nowhere(result, stream, caplog, log.values)


def test_the_same_redacted_result_again_reuses_its_reference(scoped: ScopedStore) -> None:
    log = _secret_log(64 * KiB, seed=21)
    offloader = Offloader(scoped, threshold=1000)
    first = offloader.offload(log.text, tool="tail_log")

    again = offloader.offload(log.text, tool="tail_log")

    assert first.outcome is OffloadOutcome.OFFLOADED
    assert again.outcome is OffloadOutcome.EXISTING_REFERENCE
    assert again.reason is Reason.CREDENTIAL_REDACTED
    assert again.ref == first.ref
    assert again.redacted == first.redacted
    assert scoped.store.store_usage().objects == 1


def test_a_git_diff_whose_fixtures_hold_fake_keys_is_offloaded_not_withheld(
    scoped: ScopedStore,
) -> None:
    # The repro: behind the proxy a 1.9 MB git diff of this repository became a
    # 362-byte notice because its test fixtures hold fake keys. It is a diff with markers.
    diff = CODE_FIXTURES["cargohold_git_diff.diff"].read().decode()
    fakes = [_fake(name, seed=31) for name in ("aws_akia", "rsa_private_key", "github_ghp")]
    hunk = "".join(f"+KEY_{i} = {json.dumps(fake.text)}\n" for i, fake in enumerate(fakes))
    text = diff + "diff --git a/tests/fixtures/keys.py b/tests/fixtures/keys.py\n" + hunk
    offloader = Offloader(scoped, threshold=32 * KiB)

    result = offloader.offload(text, tool="git_diff")

    assert result.outcome is OffloadOutcome.OFFLOADED
    assert result.reason is Reason.CREDENTIAL_REDACTED
    assert result.ref is not None
    assert result.stub is not None
    assert result.stub.text.startswith("[cargohold] artifact://sha256/")
    stored = scoped.read(result.ref).raise_for_outcome().decode()
    assert stored.startswith(diff)  # the whole diff, byte for byte, before the fixture
    assert stored.count("[REDACTED:") == 3
    for fake in fakes:
        _assert_shows_no_value(stored, fake.values)


def test_with_the_reject_policy_a_log_holding_credentials_is_withheld_with_kinds_and_lines(
    scoped: ScopedStore, caplog: pytest.LogCaptureFixture
) -> None:
    log = _secret_log()
    offloader, sink, stream = _observed(
        scoped, caplog, threshold=32 * KiB, secrets_policy={"tail_log": "reject"}
    )

    result = offloader.offload(log.text, tool="tail_log")

    assert result.outcome is OffloadOutcome.REJECTED
    assert result.reason is Reason.CREDENTIAL_DETECTED
    assert (result.ref, result.stub, result.event.ref) == (None, None, None)
    assert result.event.reason.value == "credential_detected"
    assert result.event.observed_bytes == len(log.data)
    assert sink.events == [result.event]
    assert scoped.store.store_usage() == Usage(0, 0)
    notice = result.text
    assert notice.startswith("[cargohold] withheld (rejected: credential_detected)")
    assert len(notice.encode()) < KiB
    assert result.event.context_bytes == len(notice.encode())
    # Every kind is named; each line number given is a line where that kind really is.
    assert {kind.value for kind in log.lines} <= set(re.findall(r"[a-z0-9_]+(?= \()", notice))
    listed = _listed_lines(notice)
    assert listed
    for kind, numbers in listed.items():
        assert set(numbers) <= set(log.lines[SecretKind(kind)])
    assert sum(len(numbers) for numbers in listed.values()) <= 20
    _assert_nowhere(result, stream, caplog, log.values)


def test_a_small_redacted_result_without_a_final_newline_counts_the_note_and_its_line_break(
    scoped: ScopedStore, caplog: pytest.LogCaptureFixture
) -> None:
    fake = _fake(sorted(FAKES)[0], seed=3)
    offloader, sink, _ = _observed(scoped, caplog)

    result = offloader.offload(f"config: {fake.text}", tool="read_config")

    assert sink.events == [result.event]
    assert result.outcome is OffloadOutcome.INLINE
    assert result.model_text.count("\n") == 1  # the line break before the note
    assert result.event.context_bytes == len(result.model_text.encode())
    assert result.event.context_bytes > len(str(result.content).encode())


@pytest.mark.parametrize("name", sorted(FAKES))
def test_by_default_a_small_result_holding_any_kind_stays_inline_redacted(
    scoped: ScopedStore, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    fake = _fake(name, seed=2)
    offloader, sink, stream = _observed(scoped, caplog)  # the default 32 KiB threshold
    value = f"ok\nconfig: {fake.text}\ndone\n"

    result = offloader.offload(value, tool="read_config")

    assert result.outcome is OffloadOutcome.INLINE
    assert result.reason is Reason.CREDENTIAL_REDACTED
    assert (result.ref, result.event.ref) == (None, None)
    assert sink.events == [result.event]
    assert scoped.store.store_usage() == Usage(0, 0)
    assert isinstance(result.content, str)
    lines = result.content.split("\n")
    assert lines[0] == "ok"
    assert lines[-2:] == ["done", ""]
    assert _marker_lines(result.content.encode()) == {kind.value: [2] for kind in fake.kinds}
    assert [(f.kind, f.line) for f in result.redacted] == [(kind, 2) for kind in fake.kinds]
    # The model gets the rest of the result and, as its final line, a note of what was
    # redacted: kinds and lines, never a value, and never "before storing" (nothing was stored).
    note = result.note
    assert note.startswith("[cargohold] credentials redacted from this result: ")
    assert _listed_lines(note) == {kind.value: [2] for kind in fake.kinds}
    assert result.value_for(value) == result.content + note
    # What entered the context: the redacted result and its note line.
    assert result.event.context_bytes == len(result.model_text.encode())
    _assert_nowhere(result, stream, caplog, fake.values)


@pytest.mark.parametrize("name", sorted(FAKES))
def test_with_the_reject_policy_a_small_result_holding_any_kind_is_withheld_never_inline(
    scoped: ScopedStore, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    fake = _fake(name, seed=2)
    offloader, _, stream = _observed(scoped, caplog, secrets_policy={"*": "reject"})

    result = offloader.offload(f"ok\nconfig: {fake.text}\n", tool="read_config")

    assert result.outcome is OffloadOutcome.REJECTED
    assert result.reason is Reason.CREDENTIAL_DETECTED
    assert result.ref is None
    for kind in fake.kinds:
        assert f"{kind.value} (line 2)" in result.text
    assert scoped.store.store_usage() == Usage(0, 0)
    _assert_nowhere(result, stream, caplog, fake.values)


def test_json_data_holding_a_credential_is_handed_on_as_data_with_markers(
    scoped: ScopedStore,
) -> None:
    fake = _fake("aws_pair", seed=3)
    key_id, secret = fake.values
    value = {"AccessKeyId": key_id, "SecretAccessKey": secret, "Expiration": 3600}

    result = Offloader(scoped).offload(value, tool="sts")

    assert result.outcome is OffloadOutcome.INLINE
    assert result.value_for(value) == {
        "AccessKeyId": "[REDACTED:aws_access_key_id]",
        "SecretAccessKey": "[REDACTED:aws_secret_access_key]",
        "Expiration": 3600,
    }
    clean = {"Expiration": 3600}
    assert Offloader(scoped).offload(clean, tool="sts").value_for(clean) is clean


def test_a_redacted_binary_result_keeps_its_length(scoped: ScopedStore) -> None:
    fake = _fake("rsa_private_key", seed=6)
    raw = random.Random(6).randbytes(40 * KiB)
    data = raw[:1000] + b"\x00" + fake.text.encode() + b"\x00" + raw[1000:]
    offloader = Offloader(scoped, threshold=32 * KiB)

    result = offloader.offload(data, tool="fetch_archive")

    assert result.outcome is OffloadOutcome.OFFLOADED
    assert result.reason is Reason.CREDENTIAL_REDACTED
    assert result.ref is not None
    stored = scoped.read(result.ref).raise_for_outcome()
    assert len(stored) == len(data)  # the bytes around the key are where they were
    assert stored[:1001] == data[:1001]
    assert stored[1001:].startswith(b"[REDACTED:private_key]")
    assert stored.endswith(raw[1000:])
    assert find_secrets(stored) == []


def test_with_the_reject_policy_json_data_holding_a_credential_is_rejected(
    scoped: ScopedStore,
) -> None:
    fake = _fake("aws_pair", seed=3)
    key_id, secret = fake.values

    result = Offloader(scoped, secrets_policy={"sts": "reject"}).offload(
        {"AccessKeyId": key_id, "SecretAccessKey": secret}, tool="sts"
    )

    assert result.outcome is OffloadOutcome.REJECTED
    assert "aws_access_key_id (line 1), aws_secret_access_key (line 1)" in result.text
    _assert_shows_no_value(result.text, fake.values)


def test_with_the_mask_policy_the_exact_bytes_are_stored_and_the_stub_masks_them(
    scoped: ScopedStore, caplog: pytest.LogCaptureFixture
) -> None:
    log = _secret_log()
    offloader, _, stream = _observed(
        scoped, caplog, threshold=32 * KiB, secrets_policy={"tail_log": "mask"}
    )

    result = offloader.offload(log.text, tool="tail_log")

    assert result.outcome is OffloadOutcome.OFFLOADED
    assert result.reason is Reason.CREDENTIAL_MASKED
    assert result.ref == Ref.of(log.data)  # the digest of the real bytes
    assert result.event.ref == str(result.ref)
    assert scoped.read(result.ref).raise_for_outcome() == log.data
    record = scoped.stat(result.ref).record
    assert record is not None
    assert record.sensitivity is Sensitivity.RESTRICTED
    assert result.stub is not None
    assert "[masked:" in result.stub.text
    # Unmasked, this preview would have quoted credentials: the masking is what hides them.
    unmasked = render_stub(log.data, result.ref, media_type="text/plain", tool="tail_log")
    assert any(value in unmasked.text for value in log.values)
    _assert_nowhere(result, stream, caplog, log.values)


def test_every_read_of_a_masked_artifact_masks_its_credentials_and_tools_get_the_exact_bytes(
    scoped: ScopedStore,
) -> None:
    # The stub masks; so must every model-facing read of the same artifact (a read tool is the
    # model's own call), including a range that starts or ends inside a credential, which a
    # scan of the range alone could not recognise. A tool the reference is passed to gets the
    # exact bytes: that is what the mask policy stores them for.
    log = _secret_log(64 * KiB, seed=13)
    offloader = Offloader(scoped, threshold=1000, secrets_policy={"tail_log": "mask"})
    ref = offloader.offload(log.text, tool="tail_log").ref
    assert ref is not None
    reader = Rehydrator(scoped, default_budget=256 * KiB)
    data = log.data
    answers = [
        reader.read(ref),
        reader.read_lines(ref, 1),
        reader.grep(ref, "ERROR"),
        reader.grep(ref, "[A-Za-z0-9+/]{16}"),
    ]
    for value in log.values:
        at = data.index(value.encode())
        middle = at + len(value) // 2
        answers += [
            reader.read(ref, offset=middle, length=4 * KiB),  # starts inside the credential
            reader.read(ref, offset=max(0, middle - 4 * KiB), length=4 * KiB),  # ends inside
        ]
    for answer in answers:
        assert answer.outcome is RehydrateOutcome.RESOLVED
        assert answer.segment is not None
        _assert_shows_no_value(answer.segment, log.values)
        # It says so: the answer is not the exact bytes (its span, in the segment's header).
        assert answer.masked
        assert ", credentials masked |" in answer.segment.split("\n", 1)[0]
    clean = reader.read(ref, offset=0, length=64)  # a range with no credential in it
    assert clean.ok
    assert not clean.masked
    assert "[masked:" in (answers[0].segment or "")
    # The masked answer keeps the real bytes' length: spans and line numbers hold.
    assert answers[0].answer_bytes == len(data)
    assert reader.resolve_arguments({"log": str(ref)}) == {"log": log.text}


def test_a_query_of_masked_json_masks_the_credentials_it_returns(scoped: ScopedStore) -> None:
    fake = _fake("aws_pair", seed=4)
    key_id, secret = fake.values
    document = [{"user": f"u{i}", "note": "ok " * 40} for i in range(40)]
    document[17] = {"user": "deploy", "AccessKeyId": key_id, "SecretAccessKey": secret}
    offloader = Offloader(scoped, threshold=1000, secrets_policy={"sts": "mask"})
    ref = offloader.offload(document, tool="sts").ref
    assert ref is not None

    answer = Rehydrator(scoped).query(ref, "[?user=='deploy']")

    assert answer.outcome is RehydrateOutcome.RESOLVED
    assert answer.segment is not None
    assert "deploy" in answer.segment
    assert "[masked" in answer.segment
    _assert_shows_no_value(answer.segment, fake.values)


def test_the_same_masked_result_again_reuses_its_reference_and_still_masks(
    scoped: ScopedStore, caplog: pytest.LogCaptureFixture
) -> None:
    log = _secret_log(64 * KiB, seed=11)
    offloader, _, stream = _observed(
        scoped, caplog, threshold=1000, secrets_policy={"tail_log": "mask"}
    )
    first = offloader.offload(log.text, tool="tail_log")

    again = offloader.offload(log.text, tool="tail_log")

    assert again.outcome is OffloadOutcome.EXISTING_REFERENCE
    assert again.ref == first.ref
    assert again.stub is not None
    assert "[masked:" in again.stub.text
    _assert_nowhere(again, stream, caplog, log.values)


def test_the_mask_policy_is_per_tool(scoped: ScopedStore) -> None:
    log = _secret_log(64 * KiB, seed=12)
    offloader = Offloader(scoped, threshold=1000, secrets_policy={"tail_log": "mask"})

    assert offloader.secrets_policy_for("tail_log") == "mask"
    assert offloader.secrets_policy_for("fetch") == "redact"
    assert offloader.secrets_policy_for(None) == "redact"
    assert offloader.offload(log.text, tool="fetch").reason is Reason.CREDENTIAL_REDACTED
    assert offloader.offload(log.text).reason is Reason.CREDENTIAL_REDACTED
    assert offloader.offload(log.text, tool="tail_log").reason is Reason.CREDENTIAL_MASKED


def test_a_star_entry_sets_the_policy_of_every_tool_not_named(scoped: ScopedStore) -> None:
    log = _secret_log(64 * KiB, seed=14)
    offloader = Offloader(
        scoped, threshold=1000, secrets_policy={"*": "reject", "tail_log": "redact"}
    )

    assert offloader.secrets_policy_for("fetch") == "reject"
    assert offloader.secrets_policy_for(None) == "reject"
    assert offloader.offload(log.text, tool="fetch").reason is Reason.CREDENTIAL_DETECTED
    assert offloader.offload(log.text, tool="tail_log").reason is Reason.CREDENTIAL_REDACTED


def test_below_the_threshold_a_masked_result_is_offloaded_not_inline(
    scoped: ScopedStore, caplog: pytest.LogCaptureFixture
) -> None:
    fake = _fake("bearer_header", seed=4)
    value = f"GET /v1/me 200\nrequest headers: {fake.text}\n"
    offloader, _, stream = _observed(scoped, caplog, secrets_policy={"http": "mask"})

    result = offloader.offload(value, tool="http")

    assert len(value) < 32 * KiB
    assert result.outcome is OffloadOutcome.OFFLOADED
    assert result.reason is Reason.CREDENTIAL_MASKED
    assert result.ref is not None
    assert scoped.read(result.ref).raise_for_outcome() == value.encode()
    assert result.stub is not None
    assert "Authorization: Bearer [masked:authorization_header]" in result.stub.text
    _assert_nowhere(result, stream, caplog, fake.values)


@pytest.mark.parametrize("sensitivity", ["secret", "credential", "raw_auth"])
@pytest.mark.parametrize("value", ["hunter2-but-longer", b"\x00binary-api-key", {"pin": 4321}])
def test_a_small_value_flagged_sensitive_is_rejected_never_inline(
    scoped: ScopedStore,
    caplog: pytest.LogCaptureFixture,
    sensitivity: str,
    value: object,
) -> None:
    offloader, sink, stream = _observed(scoped, caplog)

    result = offloader.offload(value, tool="vault_read", sensitivity=sensitivity)

    assert result.outcome is OffloadOutcome.REJECTED
    assert result.reason is Reason.SENSITIVITY
    assert result.ref is None
    assert sink.events == [result.event]
    assert scoped.store.store_usage() == Usage(0, 0)
    _assert_nowhere(result, stream, caplog, ("hunter2-but-longer", "binary-api-key", "4321"))


def test_an_unknown_sensitivity_is_a_usage_error_at_any_size(scoped: ScopedStore) -> None:
    with pytest.raises(UsageError):
        Offloader(scoped).offload("small", sensitivity="top-secret")


class _FailingStore:
    """A backend whose puts fail with an error that quotes what it was given."""

    def __init__(self, inner: MemoryStore) -> None:
        self._inner = inner
        self.limits = inner.limits

    def put(self, scope: Scope, data: bytes, request: Any) -> Any:
        raise StoreUnavailableError(f"down while writing {data[:200]!r}")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_store_failure_under_the_mask_policy_shows_no_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = _fake("jwt", seed=5)
    scoped = ScopedStore(_FailingStore(MemoryStore()), OWNER)
    offloader, _, stream = _observed(scoped, caplog, secrets_policy={"login": "mask"})

    result = offloader.offload(fake.text, tool="login")

    assert result.outcome is OffloadOutcome.FAILED
    _assert_nowhere(result, stream, caplog, fake.values)


def test_an_error_raised_for_a_result_holding_credentials_shows_no_value(
    scoped: ScopedStore,
) -> None:
    log = _secret_log(64 * KiB, seed=13)
    offloader = Offloader(scoped, threshold=1000, secrets_policy={"tail_log": "mask"})

    with pytest.raises(UsageError) as raised:
        offloader.offload(log.text, tool="tail_log", budget="enormous")

    _assert_shows_no_value(str(raised.value) + repr(raised.value), log.values)


# -- configuration ------------------------------------------------------------------------


def test_the_secrets_policy_is_read_from_the_environment(
    scoped: ScopedStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CARGOHOLD_SECRETS_POLICY", "tail_log=mask, fetch=reject")

    offloader = Offloader(scoped)

    assert offloader.secrets_policy_for("tail_log") == "mask"
    assert offloader.secrets_policy_for("fetch") == "reject"
    result = offloader.offload(_fake("jwt").text, tool="tail_log")
    assert result.reason is Reason.CREDENTIAL_MASKED


def test_a_star_entry_is_read_from_the_environment(
    scoped: ScopedStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CARGOHOLD_SECRETS_POLICY", "*=reject,tail_log=mask")

    offloader = Offloader(scoped)

    assert offloader.secrets_policy_for("fetch") == "reject"
    assert offloader.secrets_policy_for("tail_log") == "mask"
    assert offloader.offload(_fake("jwt").text, tool="fetch").reason is Reason.CREDENTIAL_DETECTED


def test_the_secrets_policy_is_read_from_the_configuration_file(tmp_path: Path) -> None:
    (tmp_path / "cargohold.toml").write_text('[secrets_policy]\ntail_log = "mask"\n')

    settings = load_settings(environ={}, cwd=tmp_path)

    assert settings.secrets_policy == {"tail_log": "mask"}


@pytest.mark.parametrize(
    "policy", [{"tail_log": "allow"}, {"tail_log": True}, ["tail_log"], "tail_log"]
)
def test_a_bad_secrets_policy_is_a_configuration_error(policy: object) -> None:
    with pytest.raises(ConfigError, match="secrets_policy"):
        load_settings({"secrets_policy": policy}, environ={})


def test_a_bad_secrets_policy_argument_is_a_usage_error(scoped: ScopedStore) -> None:
    with pytest.raises(UsageError):
        Offloader(scoped, threshold=1000, secrets_policy={"tail_log": "allow"})


# -- the MCP surface ----------------------------------------------------------------------------


def _mcp_hold(policy: str | None, tmp_path: Path) -> Any:
    import cargohold

    config = tmp_path / "cargohold.toml"
    config.write_text("" if policy is None else f'[secrets_policy]\n"*" = "{policy}"\n')
    return cargohold.open("memory://", session="mcp", config_file=config)


def _stored_bodies(hold: Any) -> list[bytes]:
    bodies = []
    for record in hold.store.artifacts():
        answer = hold.store.read(record.ref)
        assert answer.data is not None
        bodies.append(answer.data)
    return bodies


@pytest.mark.parametrize("policy", [None, "reject"])
@pytest.mark.parametrize("name", ["rsa_private_key", "ec_private_key", "openssh_private_key"])
def test_a_key_in_heavy_json_text_and_its_structured_copy_never_reaches_the_store(
    name: str, policy: str | None, tmp_path: Path
) -> None:
    # The repro: an MCPServer tool returns heavy JSON text, which the SDK sends as a
    # text part and as structuredContent {"result": text}, where the key is escaped twice.
    pytest.importorskip("mcp_types")
    from mcp_types import CallToolResult, TextContent

    from cargohold.mcp import offload_result

    fake = _fake(name, seed=41)
    text = _heavy_json_text(fake)
    result = CallToolResult(content=[TextContent(text=text)], structured_content={"result": text})

    with _mcp_hold(policy, tmp_path) as hold:
        offloaded = offload_result(hold, result, tool="export_keys")
        bodies = _stored_bodies(hold)

    seen = offloaded.model_dump_json()
    _assert_shows_no_value(seen, fake.values)
    for body in bodies:
        _assert_shows_no_value(body.decode(), fake.values)
    if policy is None:  # redact: the JSON is stored, with a marker where the key was
        (body,) = bodies
        assert [r for r in json.loads(body) if r["id"] == -1] == [
            {"id": -1, "key": "[REDACTED:private_key]"}
        ]
    else:
        assert bodies == []


def test_a_small_mcp_result_holding_a_credential_reaches_the_client_redacted(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp_types")
    from mcp_types import CallToolResult, TextContent

    from cargohold.mcp import offload_result

    fake = _fake("github_ghp", seed=42)
    text = f"remote configured\ntoken: {fake.text}\n"
    result = CallToolResult(
        content=[TextContent(text=text)], structured_content={"result": text, "ok": True}
    )

    with _mcp_hold(None, tmp_path) as hold:
        offloaded = offload_result(hold, result, tool="git_remote")

    redacted = "remote configured\ntoken: [REDACTED:github_token]\n"
    assert [part.text for part in offloaded.content if isinstance(part, TextContent)] == [
        redacted,
        "[cargohold] credentials redacted from this result: github_token (line 2)",
    ]
    assert offloaded.structured_content == {"result": redacted, "ok": True}


def test_a_small_binary_part_kept_inline_by_policy_never_carries_a_key_to_the_client(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp_types")
    from mcp_types import CallToolResult, ImageContent

    from cargohold.mcp import ResultPolicy, offload_result

    fake = _fake("ec_private_key", seed=45)
    raw = b"\x89PNG\r\n\x1a\n" + random.Random(45).randbytes(200) + fake.text.encode()
    part = ImageContent(data=base64.b64encode(raw).decode(), mime_type="image/png")
    clean = ImageContent(data=base64.b64encode(raw[:208]).decode(), mime_type="image/png")
    result = CallToolResult(content=[part, clean])

    with _mcp_hold(None, tmp_path) as hold:
        offloaded = offload_result(
            hold, result, tool="screenshot", policy=ResultPolicy(default="inline")
        )

    assert offloaded.content[1] == clean  # inline by policy, as it came
    assert not isinstance(offloaded.content[0], ImageContent)
    seen = offloaded.model_dump_json()
    for value in fake.values:
        assert base64.b64encode(value.encode()).decode()[8:40] not in seen
    _assert_shows_no_value(seen, fake.values)


# -- cargohold put --------------------------------------------------------------------------------


def _cli_put(tmp_path: Path, data: bytes, *args: str, config: str = "") -> Any:
    from click.testing import CliRunner

    from cargohold.cli import cli

    (tmp_path / "cargohold.toml").write_text(config)
    scope = ["--tenant", "acme", "--user", "ana", "--session", "put"]
    store = ["--store", str(tmp_path / "store"), "--config", str(tmp_path / "cargohold.toml")]
    return CliRunner().invoke(cli, [*store, *scope, "put", "-", *args], input=data)


def _cli_cat(tmp_path: Path, ref: str) -> bytes:
    from click.testing import CliRunner

    from cargohold.cli import cli

    scope = ["--tenant", "acme", "--user", "ana", "--session", "put"]
    store = ["--store", str(tmp_path / "store"), "--config", str(tmp_path / "cargohold.toml")]
    result = CliRunner().invoke(cli, [*store, *scope, "cat", ref])
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


def test_cargohold_put_stores_a_file_with_its_credentials_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CARGOHOLD_SECRETS_POLICY", raising=False)
    fake = _fake("aws_pair", seed=46)
    data = f"[default]\nkeys = {fake.text}\nregion = eu-west-1\n".encode()

    stored = _cli_put(tmp_path, data, "--tool", "cat_config")

    assert stored.exit_code == 0, stored.output
    ref = stored.stdout.strip()
    body = _cli_cat(tmp_path, ref)
    assert body == (
        b"[default]\nkeys = [REDACTED:aws_access_key_id],[REDACTED:aws_secret_access_key]\n"
        b"region = eu-west-1\n"
    )
    assert ref == str(Ref.of(body))
    _assert_shows_no_value(stored.output, fake.values)


def test_cargohold_put_under_the_reject_policy_stores_nothing_and_exits_8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CARGOHOLD_SECRETS_POLICY", raising=False)
    fake = _fake("github_ghp", seed=47)
    data = f"token: {fake.text}\n".encode()

    refused = _cli_put(tmp_path, data, config='[secrets_policy]\n"*" = "reject"\n')

    assert refused.exit_code == 8
    assert "github_token (line 1)" in refused.output
    _assert_shows_no_value(refused.output, fake.values)
    store = LocalStore(tmp_path / "store")
    try:
        assert store.store_usage() == Usage(0, 0)
    finally:
        store.close()


# -- the working context --------------------------------------------------------------------------


@pytest.mark.parametrize("budget", ["light", "balanced", "max"])
def test_a_worker_output_holding_credentials_is_stored_redacted_and_its_projection_says_so(
    budget: str, tmp_path: Path
) -> None:
    from cargohold import Budget
    from cargohold.working import WorkingContext
    from working_fixtures import build_log, open_hold

    log = build_log(3_000)
    fakes = [_fake("aws_akia", seed=48), _fake("rsa_private_key", seed=48)]
    lines = log.split("\n")
    lines.insert(1_500, f"deploy key: {fakes[0].text}")
    lines.insert(2_200, fakes[1].text)
    output = "\n".join(lines)
    values = tuple(v for fake in fakes for v in fake.values)

    (tmp_path / "cargohold.toml").write_text("")  # the default policy, whatever the cwd holds
    with open_hold(config_file=tmp_path / "cargohold.toml") as hold:
        context = WorkingContext(hold, budget=budget)
        result = context.submit(output, worker="deployer", status="passed")
        shown = [context.project(result)]
        restored = WorkingContext.restore(hold, context.checkpoint())
        shown.append(restored.project(restored.results[0]))
        raw = result.raw_ref
        assert raw is not None
        stored = hold.store.read(raw.ref).raise_for_outcome()

    assert result.status.value == "passed"
    _assert_shows_no_value(stored.decode(), values)
    assert raw.size == len(stored)
    for text in shown:
        _assert_shows_no_value(text, values)
        assert "credentials redacted before storing: aws_access_key_id (line 1,501)" in text
        assert len(text.encode()) <= int(Budget.parse(budget))
