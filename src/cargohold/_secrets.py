"""Credentials on the way in: find them in a tool's result before it is inlined or stored.

A vetted rule set of high-confidence kinds, compiled into one RE2 alternation and run over the
bytes once (linear time, whatever the input). Each rule matches a shape that only a credential
has (a fixed prefix such as ``AKIA`` or ``ghp_``, a PEM private-key block, a JWT whose header
decodes to JSON, an ``Authorization`` header, a password in a URL, a password assigned on a line
of its own), so that ordinary logs, JSON, CSV, HTML, code and base64 raise no false alarm. The
bytes are scanned as they are stored: inside JSON strings, however many times escaped. The rules
whose shape alone is not enough (a bearer token, a basic-auth header, a URL password, a JWT, an
assigned password) confirm a match in Python. Clean
bytes cost one pass of the automaton (about 2 ms per MiB here); each match, a few tens of
microseconds more (``python -m bench secrets``; docs/secrets.md).

``detect-secrets`` (Yelp) was the maintained alternative and its plugins are this rule set's
reference (its regexes for AWS, GitHub, Slack, Stripe, JWT, private keys and basic auth), but it
scans line by line through every plugin in Python: 4.8 s for 1 MiB of log and 72 s for 16 MiB
here, a thousand times a durable put of the same bytes. Its keyword and high-entropy plugins are
left out on purpose: they flag any long random-looking string (hashes, ids, base64 data).

A finding names the kind, the 1-based line and the byte span, never the value: there is no field
that could hold it. Two rewritings: :func:`redact_secrets` replaces each span by a marker of its
kind, keeping its line breaks (what the default ``redact`` policy stores), and
:func:`mask_secrets` overwrites each span in place, same length (the ``mask`` policy's views of
exact bytes). :func:`policy_for`, :func:`screen_bytes`, :func:`screen_put` and
:func:`screen_text` apply a policy for the surfaces that store or show bytes without the offload
seam (``cargohold put``; an MCP part's ``_meta`` and links).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import enum
import functools
import hashlib
import json
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import re2

from cargohold._re2 import byte_options


class SecretKind(enum.StrEnum):
    """The kinds of credential the detector knows, as stable codes."""

    PRIVATE_KEY = "private_key"
    AWS_ACCESS_KEY_ID = "aws_access_key_id"
    AWS_SECRET_ACCESS_KEY = "aws_secret_access_key"  # noqa: S105 - a kind's name, not a secret
    JWT = "jwt"
    GITHUB_TOKEN = "github_token"  # noqa: S105 - a kind's name, not a secret
    SLACK_TOKEN = "slack_token"  # noqa: S105 - a kind's name, not a secret
    SLACK_WEBHOOK = "slack_webhook"
    STRIPE_LIVE_KEY = "stripe_live_key"
    GOOGLE_API_KEY = "google_api_key"
    OPENAI_API_KEY = "openai_api_key"
    ANTHROPIC_API_KEY = "anthropic_api_key"
    AUTHORIZATION_HEADER = "authorization_header"
    URL_CREDENTIALS = "url_credentials"
    GITLAB_TOKEN = "gitlab_token"  # noqa: S105 - a kind's name, not a secret
    AZURE_STORAGE_KEY = "azure_storage_key"
    NPM_TOKEN = "npm_token"  # noqa: S105 - a kind's name, not a secret
    SECRET_ASSIGNMENT = "secret_assignment"  # noqa: S105 - a kind's name, not a secret


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """Where one credential is: its kind, line and byte span. Never its value.

    Attributes:
        kind: What was found.
        line: The 1-based line the credential starts on.
        start: Offset of its first byte.
        end: Offset just past its last byte.
    """

    kind: SecretKind
    line: int
    start: int
    end: int

    @property
    def span(self) -> tuple[int, int]:
        """``(start, end)`` byte offsets of the credential."""
        return self.start, self.end


# -- confirmations: the rules whose shape alone is not enough ------------------------------


def _b64decode(value: bytes) -> bytes | None:
    padded = value + b"=" * (-len(value) % 4)
    try:
        return base64.b64decode(padded.replace(b"-", b"+").replace(b"_", b"/"), validate=True)
    except (binascii.Error, ValueError):
        return None


def _is_jwt(value: bytes) -> bool:
    # The header must decode to a JSON object naming an algorithm: a base64url run that happens
    # to start with "eyJ" and contain two dots is not a token.
    decoded = _b64decode(value.split(b".", 1)[0])
    if decoded is None:
        return False
    try:
        header = json.loads(decoded)
    except ValueError:
        return False
    return isinstance(header, dict) and "alg" in header


_DIGITS = b"0123456789"
_LOWER = b"abcdefghijklmnopqrstuvwxyz"
_UPPER = _LOWER.upper()


def _has(value: bytes, chars: bytes) -> bool:
    return len(value.translate(None, chars)) < len(value)  # C speed, unlike any() over a str


def _is_opaque_token(value: bytes) -> bool:
    # A placeholder ("xxxxxxxx...", "0000...0001", "YOUR-TOKEN-HERE-PLEASE") has few distinct
    # characters or lacks letters or digits; a generated token has all of these.
    return (
        _has(value, _DIGITS)
        and (_has(value, _LOWER) or _has(value, _UPPER))
        and len(set(value)) >= 8
    )


def _is_basic_auth(value: bytes) -> bool:
    decoded = _b64decode(value)
    if decoded is None or b":" not in decoded or _published(value):
        return False
    return all(32 <= byte < 127 for byte in decoded)


_PLACEHOLDERS = frozenset(
    {
        "password",
        "passw0rd",
        "passwort",
        "changeme",
        "changeit",
        "example",
        "secret",
        "mysecret",
        "yourpassword",
        "your-password",
        "your_password",
        "mypassword",
        "my-password",
        "my_password",
        "redacted",
        "placeholder",
    }
)


def _is_url_password(userinfo: bytes) -> bool:
    # Eight characters at least: shorter ones in URLs are the toy passwords of tests and docs
    # ("postgresql://ana:hunter2@..."), the price being that a real short password is missed.
    # Templates and placeholders ("${PASSWORD}", "%s", "<password>", "****") are not secrets,
    # nor is a phrase (httpx's docstring: "https://jo%40email.com:a%20secret@...").
    raw = userinfo.decode("latin-1").partition(":")[2]
    if any(mark in raw for mark in ("$", "%s", "{", "<", "*")):
        return False
    text = urllib.parse.unquote(raw, encoding="latin-1")
    if len(text) < 8 or text.lower() in _PLACEHOLDERS or any(c.isspace() for c in text):
        return False
    return len(set(text)) >= 4


def _has_mixed_classes(value: bytes) -> bool:
    # Generated keys mix digits, lower and upper case; words and placeholders seldom do.
    return _has(value, _DIGITS) and _has(value, _LOWER) and _has(value, _UPPER)


def _looks_generated(value: bytes) -> bool:
    # A random token of twenty characters or more has eight distinct ones and two classes
    # of digits, lower and upper case (a digit alone is missing from one in sixty); a
    # placeholder ("glpat-xxxxxxxxxxxxxxxxxxxx") has neither.
    classes = _has(value, _DIGITS) + _has(value, _LOWER) + _has(value, _UPPER)
    return classes >= 2 and len(set(value)) >= 8


_PUBLIC_KEYS = frozenset(
    {
        # The storage emulator's (Azurite's) documented, well-known account key: published
        # by Microsoft for local development, and compiled into client libraries (obstore).
        "0011cc25eb4320717494d2703e8cba85743e71b500283c21c8b88147992f9059",
        # RFC 6749's example client credentials, "Authorization: Basic czZCaGRSa3F0Mzpn...",
        # quoted in the docstrings of OAuth libraries (authlib).
        "ca7459e2b26776de081b9a07e40227fd6cff232a1e3233ff6b6aa6d036ca9981",
    }
)
"""SHA-256 of credentials published as examples (a digest: the scanner's source holds none)."""


def _published(value: bytes) -> bool:
    return hashlib.sha256(value).hexdigest() in _PUBLIC_KEYS


def _is_azure_key(value: bytes) -> bool:
    return _has_mixed_classes(value) and not _published(value)


_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_NOT_A_VALUE = ("$", "{", "}", "<", ">", "(", ")", "[", "]", "%s", "%(", "***", "://")
_NOT_SECRET_KEYS = (b"_file", b"_path", b"_dir", b"_name", b"_length", b"_len", b"_env", b"_type")


def _is_assigned_secret(value: bytes) -> bool:
    # A literal that looks typed or generated: eight characters at least, a letter and a
    # digit or symbol, six distinct. Not a template or an expression ("${DB_PASSWORD}",
    # "os.environ[...]", "get_secret()"), a path ("/run/secrets/db"), a URL (the URL rule's),
    # a dotted name ("django.contrib.auth.hashers.PBKDF2PasswordHasher") or a placeholder.
    text = value.decode("latin-1")
    lower = text.lower()
    if any(mark in text for mark in _NOT_A_VALUE) or text[:1] in ("/", ".", "~"):
        return False
    if lower in _PLACEHOLDERS or any(word in lower for word in ("example", "changeme", "xxxx")):
        return False
    if _DOTTED_NAME.fullmatch(text):
        return False
    letters = _has(value, _LOWER) or _has(value, _UPPER)
    others = len(value.translate(None, _LOWER + _UPPER)) > 0
    return letters and others and len(set(value)) >= 6


# -- where the value is, inside a match --------------------------------------------------

_Value = tuple[SecretKind, int, int]
"""A confirmed credential: its kind and its span relative to the match."""


def _whole(kind: SecretKind, confirm: Callable[[bytes], bool] | None = None) -> _Locate:
    def locate(match: bytes) -> list[_Value]:
        if confirm is not None and not confirm(match):
            return []
        return [(kind, 0, len(match))]

    return locate


def _trailing(
    kind: SecretKind, chars: bytes, confirm: Callable[[bytes], bool], *, length: int | None = None
) -> _Locate:
    """The value is the match's last run of ``chars`` (``length`` of them when fixed, before
    the one delimiter the rule consumes after it, or none at the very end of the input)."""

    def locate(match: bytes) -> list[_Value]:
        end = len(match) if match[-1:] and match[-1] in chars else len(match) - 1
        start = len(match[:end].rstrip(chars)) if length is None else end - length
        value = match[start:end]
        return [(kind, start, end)] if confirm(value) else []

    return locate


_ALNUM = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_B64_CHARS = _ALNUM + b"+/="
_OPAQUE_CHARS = _ALNUM + b"._~+/=_-"
_AWS_SECRET_CHARS = _ALNUM + b"/+"
_SEPARATORS = b"\t ,;:|\"'\\"


def _aws_pair(match: bytes) -> list[_Value]:
    # "AKIA...<separators><40 characters>": the id, and the secret when it looks generated.
    values: list[_Value] = [(SecretKind.AWS_ACCESS_KEY_ID, 0, 20)]
    rest = match[20:]
    start = 20 + len(rest) - len(rest.lstrip(_SEPARATORS))
    if _has_mixed_classes(match[start : start + 40]):
        values.append((SecretKind.AWS_SECRET_ACCESS_KEY, start, start + 40))
    return values


def _url_credentials(match: bytes) -> list[_Value]:
    # "scheme://user:password@h": the user information, all of it (a token is as often the
    # user name: https://<token>:x-oauth-basic@github.com).
    start = match.index(b"://") + 3
    end = len(match) - 2
    return [(SecretKind.URL_CREDENTIALS, start, end)] if _is_url_password(match[start:end]) else []


def _url_resume(match: bytes) -> int:
    # A refused URL (a toy password) is scanned again from its user information, where a token
    # may be written as the user name.
    return match.index(b"://") + 3


_VALUE_ENDS = b"\r\n\"'\\"


def _assignment(match: bytes) -> list[_Value]:
    # "[export ]NAME=value" on a line of its own: the value, after its opening quote (or an
    # escaped one), up to the line break, quote or escape the rule consumed after it.
    equals = match.index(b"=")
    name = match[:equals].rstrip(b"\t ").lower()
    if name.endswith(_NOT_SECRET_KEYS):
        return []
    rest = match[equals + 1 :]
    start = equals + 1 + len(rest) - len(rest.lstrip(b"\t \\\"'"))
    end = len(match) - 1 if match[-1:] and match[-1] in _VALUE_ENDS else len(match)
    value = match[start:end]
    # An AWS secret key's own name (an escaped line break puts this rule's match first, before
    # the AWS rule's at the name): the more precise kind.
    if _AWS_SECRET_NAME.search(name) and len(value) == 40 and _has_mixed_classes(value):
        return [(SecretKind.AWS_SECRET_ACCESS_KEY, start, end)]
    return [(SecretKind.SECRET_ASSIGNMENT, start, end)] if _is_assigned_secret(value) else []


_AWS_SECRET_NAME = re.compile(rb"aws_?secret(?:_?access)?_?key|secret_?access_?key")


# -- the rules --------------------------------------------------------------------------------

_Locate = Callable[[bytes], list[_Value]]


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: str
    """One alternative of the scan, without capturing groups."""
    locate: _Locate
    """The confirmed credentials inside a match of ``pattern`` (none: a false candidate)."""
    starts: tuple[bytes, ...] = ()
    """What a match begins with, lower-cased (anything when empty): which rules to try on a
    match of the alternation, so that finding its rule costs one call, not twenty."""
    resume: Callable[[bytes], int] = len
    """Where to scan on after a false candidate, relative to its start (after it by default)."""


_B64 = r"A-Za-z0-9+/="
_PEM_LABEL = r"-----(?:BEGIN|END) (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"
# Escapes, however many layers deep: JSON text inside a JSON string (an MCP server's
# structuredContent {"result": text}) doubles every backslash of the text, so "\n" is "\\n"
# there, "\\\\n" one layer further, and so on. Every rule takes any number of backslashes
# where one JSON layer puts one: the stored bytes are scanned as they are, escaped or not,
# and a finding's span is in those bytes (what redaction overwrites).
_EOL = r"(?:\r?\n|(?:\\+r)?\\+n)"  # a line break, or its escape inside a JSON string
_OPAQUE = r"[A-Za-z0-9._~+/=_-]"  # bearer tokens: base64url, base64, and the RFC 6750 extras
_QUOTE = r"\\*[\"']?"  # a quote, or an escaped one inside a JSON string
_W = r"(?:\b|\\+[nrt])"
"""Where a token may begin: a word boundary, or right after an escaped line break or tab
(``"...\\nAKIA..."``: no boundary between ``n`` and ``A``). The escape is in the match, not in
the finding (:func:`find_secrets` starts each value after it)."""
_AUTHORIZATION = r"(?i:authorization)" + _QUOTE + r"[\t ]*[:=][\t ]*" + _QUOTE

_RULES: tuple[_Rule, ...] = (
    # A PEM or PGP private key block: the header, optional header lines (Proc-Type, DEK-Info,
    # Version), at least one full line of base64, the rest of the body and the footer when
    # present. The whole block is the value; a truncated block is masked to the end of its run.
    _Rule(
        _PEM_LABEL.replace("(?:BEGIN|END)", "BEGIN") + r"(?:[\t ]*" + _EOL + r")+"
        r"(?:[A-Za-z][A-Za-z-]*: [^\r\n\\]*(?:" + _EOL + r")+)*"
        r"(?:[" + _B64 + r"]|\\+/){40}(?:[" + _B64 + r"\t\r\n ]|\\+[rnt/])*"
        r"(?:" + _PEM_LABEL.replace("(?:BEGIN|END)", "END") + r")?",
        _whole(SecretKind.PRIVATE_KEY),
        (b"-----begin ",),
    ),
    # An access key id followed closely by its secret (the IAM console's CSV, "id:secret").
    _Rule(
        _W + r"(?:AKIA|ASIA)[A-Z0-9]{16}[\t ,;:|\"'\\]{1,12}[A-Za-z0-9/+]{40}"
        r"(?:[^A-Za-z0-9/+=]|$)",
        _aws_pair,
        (b"akia", b"asia"),
    ),
    _Rule(
        _W + r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
        _whole(SecretKind.AWS_ACCESS_KEY_ID),
        (b"akia", b"asia", b"abia", b"acca"),
    ),
    # A secret access key after its name (credentials file, environment, STS JSON output).
    _Rule(
        r"(?i:aws_?secret(?:_?access)?_?key|secret_?access_?key)" + _QUOTE + r"[\t ]*"
        r"(?:=>|:=|[:=])[\t ]*" + _QUOTE + r"[A-Za-z0-9/+]{40}(?:[^A-Za-z0-9/+=]|$)",
        _trailing(
            SecretKind.AWS_SECRET_ACCESS_KEY, _AWS_SECRET_CHARS, _has_mixed_classes, length=40
        ),
        (b"aws", b"secret"),
    ),
    # An Authorization header (HTTP, curl -H, a JSON or YAML headers map). Before the JWT rule
    # so that "Authorization: Bearer eyJ..." is one finding.
    _Rule(
        _AUTHORIZATION + r"(?i:bearer|token)[\t ]+" + _OPAQUE + r"{20,}",
        _trailing(SecretKind.AUTHORIZATION_HEADER, _OPAQUE_CHARS, _is_opaque_token),
        (b"authorization",),
    ),
    _Rule(
        _AUTHORIZATION + r"(?i:basic)[\t ]+[" + _B64 + r"]{8,}",
        _trailing(SecretKind.AUTHORIZATION_HEADER, _B64_CHARS, _is_basic_auth),
        (b"authorization",),
    ),
    _Rule(
        _W + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}",
        _whole(SecretKind.JWT, _is_jwt),
        (b"eyj",),
    ),
    _Rule(_W + r"gh[pousr]_[A-Za-z0-9]{36,}\b", _whole(SecretKind.GITHUB_TOKEN), (b"gh",)),
    _Rule(
        _W + r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59,}\b",
        _whole(SecretKind.GITHUB_TOKEN),
        (b"github_pat_",),
    ),
    _Rule(
        _W + r"(?:xox[abposre]|xapp)-[0-9]+-[A-Za-z0-9-]{20,}",
        _whole(SecretKind.SLACK_TOKEN, _is_opaque_token),
        (b"xox", b"xapp-"),
    ),
    _Rule(
        r"https://hooks\.slack\.com/(?:services|workflows)/T[A-Z0-9]{6,}/[A-Z0-9]{6,}/"
        r"[A-Za-z0-9]{16,}",
        _whole(SecretKind.SLACK_WEBHOOK),
        (b"https://hooks.slack.com/",),
    ),
    _Rule(
        _W + r"(?:sk|rk)_live_[A-Za-z0-9]{24,}\b",
        _whole(SecretKind.STRIPE_LIVE_KEY),
        (b"sk_live_", b"rk_live_"),
    ),
    _Rule(
        _W + r"AIza[A-Za-z0-9_-]{35}(?:[^A-Za-z0-9_-]|$)",
        _trailing(SecretKind.GOOGLE_API_KEY, _ALNUM + b"_-", lambda _: True, length=39),
        (b"aiza",),
    ),
    _Rule(
        _W + r"sk-ant-[a-z]{2,10}[0-9]{2}-[A-Za-z0-9_-]{40,}",
        _whole(SecretKind.ANTHROPIC_API_KEY),
        (b"sk-ant-",),
    ),
    # OpenAI: the "T3BlbkFJ" marker (base64 of "OpenAI") of user and project keys, or a typed
    # prefix with a long body.
    _Rule(
        _W + r"sk-(?:[a-z]+-)?[A-Za-z0-9_-]{16,}T3BlbkFJ[A-Za-z0-9_-]{16,}",
        _whole(SecretKind.OPENAI_API_KEY),
        (b"sk-",),
    ),
    _Rule(
        _W + r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}",
        _whole(SecretKind.OPENAI_API_KEY),
        (b"sk-",),
    ),
    # GitLab: personal, deploy, runner, pipeline-trigger and service-account tokens (and the
    # routable form's ".01.<crc>" tail).
    _Rule(
        _W + r"gl(?:pat|dt|rt|ptt|soat)-[A-Za-z0-9_-]{20,}(?:\.[0-9a-z]{2}\.[0-9a-z]{9})?",
        _whole(SecretKind.GITLAB_TOKEN, _looks_generated),
        (b"glpat-", b"gldt-", b"glrt-", b"glptt-", b"glsoat-"),
    ),
    _Rule(
        _W + r"npm_[A-Za-z0-9]{36}\b", _whole(SecretKind.NPM_TOKEN, _looks_generated), (b"npm_",)
    ),
    # An Azure storage account key in a connection string: 64 random bytes in base64.
    _Rule(
        r"(?i:accountkey)[\t ]*=[\t ]*[A-Za-z0-9+/]{86}==",
        _trailing(SecretKind.AZURE_STORAGE_KEY, _B64_CHARS, _is_azure_key, length=88),
        (b"accountkey",),
    ),
    # A password or secret assigned on a line of its own (.env, shell, properties, ini): the
    # name holds "password", "passwd" or "secret", the value is a literal that ends the line
    # (or its quoted string). Only the value is the finding: "DB_PASSWORD=" stays readable.
    _Rule(
        r"(?:(?m:^)|\\+n)(?:export[\t ]+)?[A-Za-z0-9_.-]*(?i:password|passwd|secret)"
        r"[A-Za-z0-9_.-]*[\t ]*=[\t ]*\\*[\"']?[^\s\"'\\]{8,}(?:[\r\n\"'\\]|$)",
        _assignment,
    ),
    # A password in a URL: scheme://user:password@host (any scheme: no literal beginning).
    _Rule(
        r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:@/\"'<>{}\[\]\\]+:[^\s:@/\"'<>{}\[\]\\]+@[A-Za-z0-9\[]",
        _url_credentials,
        resume=_url_resume,
    ),
)


_Anchored = list[tuple["re2._Regexp[bytes]", _Rule]]


@dataclass(frozen=True, slots=True)
class _Scanner:
    pattern: re2._Regexp[bytes]
    """Every rule in one alternation, in order."""
    by_first_byte: dict[int, _Anchored]
    """For each lower-cased first byte, the rules a match beginning with it may be of, in order
    (those without a literal beginning in every list), each compiled on its own."""


@functools.cache
def _scanner() -> _Scanner:
    """Compiled on first use, not at import: the CLI's start-up does not pay for it."""
    # Latin-1, so binary input is scanned like text. No capturing groups: RE2 then finds a match
    # with its DFA alone. A submatch would cost an NFA pass over the match (2 s for a 16 MiB
    # run after a key header).
    options = byte_options(never_capture=True, max_mem=64 << 20)
    pattern = re2.compile("|".join(f"(?:{rule.pattern})" for rule in _RULES).encode(), options)
    table: dict[int, _Anchored] = {b: [] for b in range(256)}
    for rule in _RULES:
        anchored = (re2.compile(rule.pattern.encode(), options), rule)
        firsts = {start[0] for start in rule.starts} if rule.starts else set(range(256))
        for first in firsts:
            table[first].append(anchored)
    return _Scanner(pattern, table)


def preload_scanner() -> None:
    """Compile the scanner now (a few milliseconds), not in the first scan: the tokenizer's
    preload thread calls this once it has loaded (:func:`cargohold._tokens.preload`). A
    failure leaves the first scan to compile it, and raise there if it must."""
    with contextlib.suppress(Exception):
        _scanner()


def _escape_at(data: bytes, start: int) -> int:
    """The length of the escaped line break or tab (``\\n``, ``\\\\\\n``...) at ``start``, or 0."""
    end = start
    while end < len(data) and data[end] == 0x5C:  # backslash
        end += 1
    if end > start and end < len(data) and data[end] in b"nrt":
        return end + 1 - start
    return 0


def _rule_at(scanner: _Scanner, data: bytes, start: int) -> tuple[_Rule, int]:
    """The rule whose match the scan found at ``start`` (the first one that matches there, as
    in the alternation), and the length of the escape its match begins with."""
    skip = _escape_at(data, start)
    head = data[start + skip : start + skip + 24].lower()
    for pattern, rule in scanner.by_first_byte[head[0] if head else 0]:
        if rule.starts and not head.startswith(rule.starts):
            continue
        if pattern.match(data, start) is not None:
            return rule, skip
    raise AssertionError("a match of the alternation matches one of its alternatives")


def find_secrets(data: bytes) -> list[SecretFinding]:
    """Every credential of a known kind in ``data``, in order.

    One pass of one RE2 automaton over the bytes. A candidate that its rule must confirm and
    cannot (a placeholder token, a short URL password) is dropped and the scan goes on after it
    (for a URL, after its scheme, so that a token written as the URL's user name is still
    found). Each byte is scanned at most a few times: linear time whatever the input.
    """
    scanner = _scanner()
    found: list[SecretFinding] = []
    line, counted = 1, 0
    pos, size = 0, len(data)
    while pos < size:
        match = scanner.pattern.search(data, pos)
        if match is None:
            break
        start, end = match.span()
        rule, skip = _rule_at(scanner, data, start)
        start += skip  # an escaped line break before the token is not part of it
        text = data[start:end]
        values = rule.locate(text)
        for kind, value_start, value_end in values:
            at = start + value_start
            line += data.count(b"\n", counted, at)
            counted = at
            found.append(SecretFinding(kind, line, at, start + value_end))
        resume = max(v[2] for v in values) if values else rule.resume(text)
        pos = max(start + resume, pos + 1)
    return found


_STAR = ord("*")
_STARS = bytes(b if b in (0x0A, 0x0D) else _STAR for b in range(256))
"""Every byte to ``*`` except the line breaks, which stay: line numbers hold."""


def mask_secrets(data: bytes, findings: Sequence[SecretFinding] | None = None) -> bytes:
    """A copy of ``data`` with every credential overwritten, for a preview.

    Each span keeps its length and its line breaks (so sizes, offsets and line numbers in a
    preview stay those of the real bytes) and starts with ``[masked:<kind>]`` where that fits,
    the rest ``*``. ``findings`` defaults to :func:`find_secrets` of ``data``.
    """
    if findings is None:
        findings = find_secrets(data)
    if not findings:
        return data
    return _overwrite(data, findings, "masked:")


def _overwrite(data: bytes, findings: Sequence[SecretFinding], label_prefix: str) -> bytes:
    """``data`` with each span overwritten in place by ``[<prefix><kind>]`` and ``*``."""
    masked = bytearray(data)
    short = f"[{label_prefix.rstrip(':')}]".encode("ascii")
    for finding in findings:
        span = data[finding.start : finding.end]
        # One C-speed pass for the stars (a truncated key block may run for megabytes), then
        # the label over the first characters that are not line breaks.
        stars = span.translate(_STARS)
        chars = len(span) - span.count(b"\n") - span.count(b"\r")
        label = f"[{label_prefix}{finding.kind.value}]".encode("ascii")
        if len(label) > chars:
            label = short if chars >= len(short) else b""
        filled = bytearray(stars)
        at = 0
        for offset in range(len(filled)):
            if at == len(label):
                break
            if filled[offset] == _STAR:
                filled[offset] = label[at]
                at += 1
        masked[finding.start : finding.end] = filled
    return bytes(masked)


_LINE_BREAKS = bytes(b for b in range(256) if b not in (0x0A, 0x0D))
"""Every byte but the line breaks: what ``bytes.translate`` deletes to keep only those."""


def redact_secrets(
    data: bytes, findings: Sequence[SecretFinding] | None = None, *, keep_length: bool = False
) -> bytes:
    """A copy of ``data`` with every credential replaced by a marker of its kind, to store.

    Each span becomes ``[REDACTED:<kind>]`` followed by the line breaks it held (a private key
    block of 27 lines leaves 26 of them), so every line number after it stays that of the
    original; the rest of the bytes are unchanged, in place. A span inside a JSON string (an
    escaped key block) becomes the marker alone, which needs no escaping: the document stays
    valid JSON. Scanning the copy again finds nothing.

    Args:
        data: The bytes to redact.
        findings: Their :func:`find_secrets` (found here when omitted).
        keep_length: Keep every span's length too (the marker, then ``*``, line breaks in
            place): for binary bytes, whose offsets a format depends on.
    """
    if findings is None:
        findings = find_secrets(data)
    if not findings:
        return data
    if keep_length:
        return _overwrite(data, findings, "REDACTED:")
    parts: list[bytes] = []
    at = 0
    for finding in findings:
        parts.append(data[at : finding.start])
        parts.append(f"[REDACTED:{finding.kind.value}]".encode("ascii"))
        parts.append(data[finding.start : finding.end].translate(None, _LINE_BREAKS))
        at = finding.end
    parts.append(data[at:])
    return b"".join(parts)


POLICIES = ("redact", "reject", "mask")
"""What becomes of a result that holds a credential: redacted before it is stored (the
default), refused whole, or stored exactly as ``restricted`` and masked on every read."""

DEFAULT_POLICY = "redact"


@dataclass(frozen=True, slots=True)
class Screened:
    """Bytes under a secrets policy (:func:`screen_bytes`).

    Attributes:
        data: What may be stored: the bytes themselves (none found, or ``mask``: store them as
            ``restricted``), their redacted copy (``redact``), or ``None`` (``reject``).
        findings: What was found (kinds and lines; offsets are the original bytes').
        policy: The policy applied.
    """

    data: bytes | None = field(repr=False)
    findings: tuple[SecretFinding, ...]
    policy: str

    @property
    def redacted(self) -> bool:
        """Whether ``data`` is a redacted copy."""
        return bool(self.findings) and self.policy == "redact"


def screen_bytes(data: bytes, policy: str = DEFAULT_POLICY, *, textual: bool = True) -> Screened:
    """``data`` under a secrets policy, for a surface that stores bytes itself (``cargohold
    put``): what the offload seam does, without its decision.

    Args:
        data: The bytes about to be stored.
        policy: ``redact``, ``reject`` or ``mask``.
        textual: ``False`` for binary bytes: a redacted copy then keeps their length.

    Raises:
        ValueError: an unknown policy.
    """
    if policy not in POLICIES:
        raise ValueError(f"a secrets policy is one of {', '.join(POLICIES)}")
    findings = tuple(find_secrets(data))
    if not findings:
        return Screened(data, (), policy)
    if policy == "reject":
        return Screened(None, findings, policy)
    if policy == "mask":
        return Screened(data, findings, policy)
    return Screened(redact_secrets(data, findings, keep_length=not textual), findings, policy)


def policy_for(policies: Mapping[str, str], tool: str | None) -> str:
    """The secrets policy of ``tool``: its own entry, else the ``"*"`` entry, else ``redact``."""
    default = policies.get("*", DEFAULT_POLICY)
    return default if tool is None else policies.get(tool, default)


_REFUSED_SENSITIVITIES = ("secret", "credential", "raw_auth")


def screen_put(
    data: bytes, policies: Mapping[str, str], *, tool: str | None, sensitivity: str
) -> tuple[bytes, str]:
    """``data`` under ``tool``'s secrets policy, for a caller that stores bytes itself
    (``cargohold put``): the bytes to store and the sensitivity to store them under.

    ``redact``: the redacted copy (binary keeps its length); ``mask``: the bytes themselves,
    ``restricted``; no credential: both unchanged. A sensitivity the store refuses is left to
    the store to refuse. Light on purpose (RE2 and the error types only): the CLI's ``put``
    imports no projector.

    Raises:
        RejectedError: the policy is ``reject`` and ``data`` holds a credential (reason
            ``credential_detected``; the message names kinds and lines, never a value).
    """
    from cargohold._errors import RejectedError
    from cargohold._text import looks_textual

    if str(sensitivity) in _REFUSED_SENSITIVITIES:
        return data, sensitivity
    policy = policy_for(policies, tool)
    screened = screen_bytes(data, policy, textual=looks_textual(data))
    if screened.data is None:
        whose = f"tool {tool}" if tool else "every tool"
        raise RejectedError(
            f"the bytes hold credentials: {describe_findings(screened.findings)}; nothing was "
            f"stored (the secrets_policy of {whose} is reject)",
            reason="credential_detected",
        )
    if screened.findings and policy == "mask":
        return data, "restricted"
    return screened.data, sensitivity


def screen_text(text: str, policy: str = DEFAULT_POLICY) -> str | None:
    """``text`` under a secrets policy, for a string that reaches a model without being stored
    (an MCP part's ``_meta``, a resource link's name): itself when it holds no credential;
    else redacted (``redact``), masked in place (``mask``: the same length), or ``None``
    (``reject``: withhold it).

    Raises:
        ValueError: an unknown policy.
    """
    if policy not in POLICIES:
        raise ValueError(f"a secrets policy is one of {', '.join(POLICIES)}")
    data = text.encode("utf-8", "surrogatepass")
    findings = find_secrets(data)
    if not findings:
        return text
    if policy == "reject":
        return None
    screened = mask_secrets(data, findings) if policy == "mask" else redact_secrets(data, findings)
    return screened.decode("utf-8", "surrogatepass")


_MARKER = re.compile(rb"\[REDACTED:([a-z_]{1,40})\]")


def redaction_note(data: bytes, limit: int = 512, *, stored: bool = True) -> str:
    """``credentials redacted before storing: <kinds and lines>`` for the markers
    :func:`redact_secrets` left in ``data``, at most ``limit`` UTF-8 bytes; empty when none.
    With ``stored=False`` (bytes that were never stored: an inline result) it reads
    ``credentials redacted from this result: ...``.

    Read from the bytes themselves, so any view of stored bytes can say what was taken out
    (a marker a tool wrote itself is named too: it names no value either).
    """
    if b"[REDACTED:" not in data:
        return ""
    kinds = {kind.value.encode(): kind for kind in SecretKind}
    found: list[SecretFinding] = []
    line, counted = 1, 0
    for match in _MARKER.finditer(data):
        kind = kinds.get(match.group(1))
        if kind is None:
            continue
        line += data.count(b"\n", counted, match.start())
        counted = match.start()
        found.append(SecretFinding(kind, line, match.start(), match.end()))
    if not found:
        return ""
    where = "before storing" if stored else "from this result"
    text = f"credentials redacted {where}: {describe_findings(found)}"
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[: max(0, limit - 4)].decode("ascii", "ignore").rsplit(" ", 1)[0] + " ..."


_MAX_LINES_PER_KIND = 5
_MAX_LINES = 20


def describe_findings(findings: Sequence[SecretFinding]) -> str:
    """Kinds and line numbers, bounded: ``jwt (line 12), aws_access_key_id (lines 3, 9)``.

    At most five line numbers per kind and twenty in all, then a count of the rest; every kind
    found is named. Never a value.
    """
    lines_by_kind: dict[SecretKind, list[int]] = {}
    for finding in findings:
        seen = lines_by_kind.setdefault(finding.kind, [])
        if finding.line not in seen:
            seen.append(finding.line)
    parts: list[str] = []
    budget = _MAX_LINES
    for kind, lines in lines_by_kind.items():
        shown = lines[: max(0, min(_MAX_LINES_PER_KIND, budget))]
        budget -= len(shown)
        more = len(lines) - len(shown)
        if not shown:  # past the budget of numbers: counted, not numbered
            parts.append(f"{kind.value} ({more:,} {'line' if more == 1 else 'lines'})")
            continue
        text = ", ".join(f"{n:,}" for n in shown) + (f" and {more:,} more" if more else "")
        parts.append(f"{kind.value} ({'line' if len(lines) == 1 else 'lines'} {text})")
    return ", ".join(parts)


__all__ = [
    "DEFAULT_POLICY",
    "POLICIES",
    "Screened",
    "SecretFinding",
    "SecretKind",
    "describe_findings",
    "find_secrets",
    "mask_secrets",
    "policy_for",
    "redact_secrets",
    "redaction_note",
    "screen_bytes",
    "screen_put",
    "screen_text",
]
