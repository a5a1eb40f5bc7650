"""A repeatable mutation run over the store, the guard and the stub: do the tests catch real bugs?

Each mutant below is one deliberate bug, written as exact edits of a source file (the old snippet,
which must occur exactly once, and its replacement), with a one-line statement of the bug and the
narrowest test files that should catch it. A mutant is *killed* when its tests fail, *survived*
when they pass. A survivor is either a gap in the tests or, rarely, a change that cannot be
observed; the latter are listed here with their reason (``accepted=``) and do not fail the run.

Run it from the project root (docs/testing.md, "Mutation run", has the procedure and the score)::

    .venv/bin/python tests/mutation_audit.py                  # every mutant, then table and score
    .venv/bin/python tests/mutation_audit.py --list           # the mutants, checked against src/
    .venv/bin/python tests/mutation_audit.py --only NAME ...  # some mutants (names or areas)

How a run works. The project (``src``, ``tests``, ``docs``, ``pyproject.toml``, ``README.md``) is
copied once to ``T/main`` beside a link ``T/shared`` to ``../shared``, so tests that read the shared
corpus find it. Every edit is checked against the copy before anything runs: a snippet that is not
found exactly once stops the run (a stale mutant must be noticed, never skipped). The tests of each
mutant's set are first run once without any mutant (a baseline that fails makes every "killed"
meaningless, so it stops the run). Then each mutant is applied to the copy, its tests run with
``.venv/bin/python -m pytest -x -q -p no:randomly -p no:cacheprovider --hypothesis-seed=0``, cwd the
copy and ``PYTHONPATH=<copy>/src`` (the copy shadows the editable install; the run checks that it
does), ``CI=true`` (PostgreSQL tests start a throwaway cluster and may not skip), no bytecode
written, a fixed hash seed and a fresh Hypothesis database per mutant, so a run is repeatable; the
file is restored afterwards. A run past ``--timeout`` counts as killed, reported apart.

A mutant marked ``unprivileged`` is run as the ``nobody`` user when the audit runs as root: a test
that only root can run (chown to another user) must not be what catches it: a kill may not depend
on the privileges of whoever runs the tests.

The exit status is 0 only when every mutant was killed or is an accepted survivor, and no mutant
ended in error (a syntax error, or pytest neither passing nor failing: a collection error, a node
id not found). A stale snippet, a missing test file or a failing baseline stops the run (2).

This file is not named ``test_*``: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("src", "tests", "docs", "pyproject.toml", "README.md")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")
PYTEST = (
    "-m",
    "pytest",
    "-x",
    "-q",
    "-p",
    "no:randomly",
    "-p",
    "no:cacheprovider",
    "--hypothesis-seed=0",
)
DEFAULT_TIMEOUT = 300.0
UNPRIVILEGED_USER = "nobody"

LOCAL = "src/cargohold/store/_local.py"
MEMORY = "src/cargohold/store/_memory.py"
POSTGRES = "src/cargohold/store/_postgres.py"
CORE = "src/cargohold/store/_core.py"
RECORDS = "src/cargohold/_records.py"
WALK = "src/cargohold/guard/_walk.py"
FORMATS = "src/cargohold/guard/_formats.py"
GUARD = "src/cargohold/guard/_guard.py"
SEGMENT = "src/cargohold/_segment.py"
STUB = "src/cargohold/_stub.py"
OFFLOAD = "src/cargohold/_offload.py"
QUERY = "src/cargohold/_query.py"
SECRETS = "src/cargohold/_secrets.py"

CONFORMANCE = "tests/test_conformance.py"
LOCAL_TESTS = "tests/test_local_store.py"
PG_CONFORMANCE = "tests/test_postgres_conformance.py"
PG_STORE = "tests/test_postgres_store.py"
GUARD_TESTS = "tests/test_guard.py"
WINDOW_TESTS = "tests/test_guard_window.py"
STUB_TESTS = "tests/test_stub.py"
OFFLOAD_TESTS = "tests/test_offload.py"
FORGERY_TESTS = "tests/test_guard_forgery.py"
OPAQUE_TESTS = "tests/test_guard_opaque.py"
SECRETS_TESTS = "tests/test_secrets.py"
READ_TOOLS_TESTS = "tests/test_read_tools.py"


@dataclass(frozen=True, slots=True)
class Edit:
    """One exact replacement: ``old`` must occur exactly once in the file when it is applied."""

    old: str
    new: str


@dataclass(frozen=True, slots=True)
class Mutant:
    """One deliberate bug.

    Attributes:
        name: A stable, unique name (``--only`` takes it).
        area: ``store``, ``guard``, ``stub`` or ``read`` (``--only`` takes an area too).
        path: The source file, relative to the project root.
        edits: Applied in order, each to the result of the previous one.
        bug: What the bug does, in one line.
        tests: Test files, node ids or globs (relative to the project root), narrowest first:
            with ``-x`` the first failure ends the run.
        unprivileged: Run its tests as ``nobody`` when the audit runs as root.
        accepted: Why surviving is acceptable (an equivalent mutant); ``None`` for a real bug.
    """

    name: str
    area: str
    path: str
    edits: tuple[Edit, ...]
    bug: str
    tests: tuple[str, ...]
    unprivileged: bool = False
    accepted: str | None = None


def _m(
    name: str,
    area: str,
    path: str,
    old: str,
    new: str,
    bug: str,
    *tests: str,
    unprivileged: bool = False,
    accepted: str | None = None,
) -> Mutant:
    return Mutant(name, area, path, (Edit(old, new),), bug, tests, unprivileged, accepted)


# fmt: off
MUTANTS: tuple[Mutant, ...] = (
    # -- store: owners, scopes and tenants -------------------------------------------------
    _m("local-read-ignores-session", "store", LOCAL,
       '" WHERE a.tenant = ? AND a.user = ? AND a.session = ? AND a.digest = ?"',
       '" WHERE a.tenant = ? AND a.user = ? AND (a.session = ? OR 1) AND a.digest = ?"',
       "a read resolves another session's artifact of the same user (owner check drops session)",
       CONFORMANCE),
    _m("memory-read-ignores-session", "store", MEMORY,
       "record = self._artifacts.get((*scope.owner, ref.digest))",
       "record = next((r for k, r in self._artifacts.items()"
       " if k[:2] == scope.owner[:2] and k[3] == ref.digest), None)",
       "memory backend: a read resolves another session's artifact of the same user",
       CONFORMANCE),
    _m("local-other-tenant-reads-unauthorized", "store", LOCAL,
       '"SELECT 1 FROM artifacts WHERE tenant = ? AND digest = ? LIMIT 1"',
       '"SELECT 1 FROM artifacts WHERE (tenant = ? OR 1) AND digest = ? LIMIT 1"',
       "another tenant's artifact reads as unauthorized, not missing (an existence oracle)",
       CONFORMANCE),
    _m("pg-other-tenant-reads-unauthorized", "store", POSTGRES,
       '" WHERE tenant = %(tenant)s AND digest = %(digest)s)",',
       '" WHERE (tenant = %(tenant)s OR true) AND digest = %(digest)s)",',
       "postgres backend: another tenant's artifact reads as unauthorized, not missing",
       PG_CONFORMANCE),
    _m("sensitivity-secret-stored", "store", RECORDS,
       "return self in (Sensitivity.PUBLIC, Sensitivity.INTERNAL, Sensitivity.RESTRICTED)",
       "return self in (Sensitivity.PUBLIC, Sensitivity.INTERNAL, Sensitivity.RESTRICTED,"
       " Sensitivity.SECRET)",
       "content marked secret is stored instead of refused",
       CONFORMANCE, OFFLOAD_TESTS),
    # -- store: digest verification on read ------------------------------------------------
    _m("local-whole-read-unverified", "store", LOCAL,
       "if hashlib.sha256(body).hexdigest() != ref.digest:\n                        return stale",
       "if False:\n                        return stale",
       "a whole read returns bytes without checking their SHA-256 (a flipped byte is served)",
       CONFORMANCE),
    _m("memory-whole-read-unverified", "store", MEMORY,
       "if len(body) != record.size or hashlib.sha256(body).hexdigest() != ref.digest:",
       "if len(body) != record.size:",
       "memory backend: a whole read returns bytes without checking their SHA-256",
       CONFORMANCE),
    _m("core-range-checks-first-chunk-only", "store", CORE,
       "for index in range(first, last + 1):",
       "for index in range(first, first + 1):",
       "a range read spanning chunks re-hashes only its first chunk",
       CONFORMANCE),
    _m("core-range-last-chunk-off-by-one", "store", CORE,
       "last = (end - 1) // chunk_size",
       "last = end // chunk_size",
       "a range ending on a chunk boundary also needs the next chunk (sound reads go stale)",
       CONFORMANCE),
    # -- store: the blob file on disk ------------------------------------------------------
    _m("local-blob-owner-unchecked", "store", LOCAL,
       "info.st_uid != os.geteuid() or ",
       "",
       "a blob file owned by another user is read (and passes verify) instead of refused",
       LOCAL_TESTS, CONFORMANCE, unprivileged=True),
    _m("local-blob-symlink-followed", "store", LOCAL,
       "os.open(digest[2:], _PROBE_FLAGS, dir_fd=dir_fd)",
       "os.open(digest[2:], _PROBE_FLAGS & ~os.O_NOFOLLOW, dir_fd=dir_fd)",
       "a blob replaced by a symlink is followed",
       LOCAL_TESTS),
    _m("local-blob-dir-symlink-followed", "store", LOCAL,
       "if os.readlink(_PROC_FD + str(dir_fd)) != parent:\n                        return None",
       "if False:\n                        return None",
       "a blob directory symlinked elsewhere is followed",
       LOCAL_TESTS),
    _m("local-root-symlink-followed", "store", LOCAL,
       "if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):",
       "if not stat.S_ISDIR(os.stat(path).st_mode):",
       "a store directory that is a symlink to a directory is accepted",
       LOCAL_TESTS),
    # -- store: writes, dedup, staging -----------------------------------------------------
    _m("local-dedup-rewrites-blob", "store", LOCAL,
       "blob_written = blob is None or not self._blob_sound(scope.tenant, digest, size)",
       "blob_written = True",
       "bytes the tenant already holds are staged and written again (no dedup)",
       CONFORMANCE),
    _m("core-repeated-put-never-refreshes", "store", CORE,
       "return old_expires < now + ttl / 2",
       "return False",
       "a repeated put of the same bytes never extends the artifact's life",
       CONFORMANCE),
    Mutant(
        "local-put-renames-after-commit", "store", LOCAL,
        (
            Edit(
                "                    _mkdir_private(path.parent)\n"
                "                    os.rename(staged, path)\n"
                "                    staged = None\n"
                "                    _fsync_dir(path.parent)\n",
                "                    pass  # MUTANT: the rename happens after the commit\n",
            ),
            Edit(
                "        finally:\n"
                "            if staged is not None:\n"
                "                with contextlib.suppress(OSError):\n"
                "                    os.unlink(staged)\n",
                "            if staged is not None:  # MUTANT: bytes moved in after the row\n"
                "                _mkdir_private(path.parent)\n"
                "                os.rename(staged, path)\n"
                "                staged = None\n"
                "                _fsync_dir(path.parent)\n"
                "        finally:\n"
                "            if staged is not None:\n"
                "                with contextlib.suppress(OSError):\n"
                "                    os.unlink(staged)\n",
            ),
        ),
        "the index row commits before the staged bytes are renamed into place (a crash between"
        " leaves a row without its bytes)",
        ("tests/test_local_store.py::test_a_write_whose_bytes_cannot_be_moved_into_place_commits"
         "_no_row",
         "tests/test_crash.py::test_a_writer_killed_at_random_points_leaves_no_partial_artifact"
         "_and_no_row_without_bytes"),
    ),
    _m("local-stage-single-chunk-shortcut", "store", LOCAL,
       "if len(data) > CHUNK_SIZE:",
       "if len(data) >= CHUNK_SIZE:",
       "a body of exactly one chunk has its chunk digest computed instead of reused",
       CONFORMANCE, LOCAL_TESTS,
       accepted="equivalent: a body of exactly CHUNK_SIZE bytes has one chunk, whose digest is"
       " the ref's digest, so hashing it again records the same bytes"),
    # -- store: TTL, expiry, quotas and limits ---------------------------------------------
    _m("local-expiry-read-boundary", "store", LOCAL,
       "if record.expires <= self._clock():",
       "if record.expires < self._clock():",
       "an artifact is still readable at the very instant it expires",
       CONFORMANCE),
    _m("local-gc-expiry-boundary", "store", LOCAL,
       '" INDEXED BY artifacts_by_expiry WHERE expires <= ?",',
       '" INDEXED BY artifacts_by_expiry WHERE expires < ?",',
       "gc keeps an artifact that expires at exactly now",
       CONFORMANCE),
    _m("local-session-quota-counts-expired", "store", LOCAL,
       '" WHERE tenant = ? AND user = ? AND session = ? AND expires > ?",\n'
       "                        (*scope.owner, now),",
       '" WHERE tenant = ? AND user = ? AND session = ? AND expires > ?",\n'
       "                        (*scope.owner, 0),",
       "expired artifacts still count toward the session quota",
       CONFORMANCE),
    _m("local-read-budget-boundary", "store", LOCAL,
       "if max_bytes is not None and stop - begin > max_bytes:",
       "if max_bytes is not None and stop - begin >= max_bytes:",
       "a read of exactly its byte budget is refused as over budget",
       CONFORMANCE),
    _m("limits-session-objects-off-by-one", "store", RECORDS,
       "if objects + 1 > self.session_objects:",
       "if objects > self.session_objects:",
       "a session may hold one artifact more than its object quota",
       CONFORMANCE),
    _m("limits-session-bytes-at-quota-refused", "store", RECORDS,
       "if size + new_size > self.session_bytes:",
       "if size + new_size >= self.session_bytes:",
       "a write that fills the session byte quota exactly is refused",
       CONFORMANCE),
    _m("limits-artifact-at-max-refused", "store", RECORDS,
       "if size > self.max_artifact_bytes:",
       "if size >= self.max_artifact_bytes:",
       "an artifact of exactly the size limit is refused",
       CONFORMANCE),
    _m("limits-ttl-at-max-refused", "store", RECORDS,
       "if ttl > self.max_ttl:",
       "if ttl >= self.max_ttl:",
       "a TTL of exactly the maximum is refused",
       CONFORMANCE),
    # -- store: gc -------------------------------------------------------------------------
    _m("local-gc-takes-shared-blob", "store", LOCAL,
       "                if live is None:\n                    blob = db.execute(",
       "                if True:\n                    blob = db.execute(",
       "gc removes the bytes of an expired artifact that another live artifact still names",
       CONFORMANCE),
    _m("memory-gc-takes-shared-blob", "store", MEMORY,
       "doomed = sorted({(k[0], k[3]) for k in expired} - remaining)",
       "doomed = sorted({(k[0], k[3]) for k in expired})",
       "memory backend: gc removes bytes another live artifact still names",
       CONFORMANCE),
    _m("local-gc-unlinks-re-added-blob", "store", LOCAL,
       "if back is None:",
       "if True:",
       "gc unlinks a blob whose row a writer re-added after gc's commit",
       "tests/test_multiprocess.py::test_bytes_re_added_while_gc_is_unlinking_them_stay_readable"),
    Mutant(
        "local-gc-unlinks-before-commit", "store", LOCAL,
        (
            Edit(
                "            if dry_run:\n"
                "                return report\n",
                "            if dry_run:\n"
                "                return report\n"
                "            for tenant, digest, _ in doomed:  # MUTANT: files before the commit\n"
                "                with contextlib.suppress(FileNotFoundError):\n"
                "                    os.unlink(self._blob_path(tenant, digest))\n",
            ),
        ),
        "gc unlinks files before the commit that removes their rows (a crash leaves rows"
        " without bytes)",
        ("tests/test_crash.py::test_a_gc_killed_between_its_commit_and_its_unlinks_leaves_orphans"
         "_reported_not_lost_rows",),
    ),
    # -- store: verify ---------------------------------------------------------------------
    _m("local-verify-misses-chunk-mismatch", "store", LOCAL,
       "        if chunk_digests(b\"\".join(pieces), chunk_size) != chunks:\n"
       "            return [Finding(\"corrupt\", digest,"
       " \"chunk digests do not match the bytes\")]\n",
       "",
       "verify does not report recorded chunk digests that do not match the bytes",
       CONFORMANCE, LOCAL_TESTS),
    _m("memory-verify-misses-chunk-mismatch", "store", MEMORY,
       "                elif chunk_digests(body) != blob.chunks:\n"
       "                    findings.append(Finding(\"corrupt\", digest, \"chunk digests do not"
       " match\"))\n",
       "",
       "memory backend: verify does not report chunk digests that do not match the bytes",
       CONFORMANCE,
       accepted="equivalent over every state the memory store can reach: its chunk digests are"
       " computed from the very bytes at put and never change, and its only fault hook"
       " (corrupt_for_tests) flips a data byte, which the whole-body digest check before this"
       " one reports; only a write into the private _blobs could reach the branch"),
    _m("pg-verify-misses-chunk-mismatch", "store", POSTGRES,
       "    if chunk_digests(body, int(chunk_size)) != bytes(chunks):\n"
       "        return [Finding(\"corrupt\", digest, \"chunk digests do not match the bytes\")]\n",
       "",
       "postgres backend: verify does not report chunk digests that do not match the bytes",
       PG_CONFORMANCE, PG_STORE),
    _m("local-verify-misses-record-without-blob-row", "store", LOCAL,
       "findings.extend(record_findings(records))",
       "findings.extend(record_findings(records)[:0])",
       "verify does not report an artifact record that has no blob row",
       CONFORMANCE, LOCAL_TESTS),
    _m("pg-verify-misses-record-without-blob-row", "store", POSTGRES,
       "conn.execute(self._sql.records_check, binary=True).fetchall()\n            )",
       "conn.execute(self._sql.records_check, binary=True).fetchall()\n            )[:0]",
       "postgres backend: verify does not report an artifact record that has no blob row",
       PG_CONFORMANCE, PG_STORE),
    _m("local-verify-misses-orphan", "store", LOCAL,
       'findings.append(Finding("orphan", digest, "bytes no record names"))',
       "pass",
       "verify does not report a blob file that no record names",
       LOCAL_TESTS),
    # -- guard -----------------------------------------------------------------------------
    _m("guard-part-at-threshold-passes", "guard", WALK,
       "        if size >= self.threshold:\n            self.judge(",
       "        if size > self.threshold:\n            self.judge(",
       "a raw part of exactly the heavy threshold passes",
       GUARD_TESTS),
    _m("guard-chat-fast-path-at-threshold", "guard", FORMATS,
       "                    size < threshold\n                    # value[0] first",
       "                    size <= threshold\n                    # value[0] first",
       "a raw chat message string of exactly the threshold passes (the fast path)",
       GUARD_TESTS),
    _m("guard-split-part-at-threshold-passes", "guard", WALK,
       "if raw >= self.threshold:",
       "if raw > self.threshold:",
       "a tool result split in parts that add up to exactly the threshold passes",
       GUARD_TESTS),
    _m("guard-split-parts-not-summed", "guard", WALK,
       "size = sum(n for _, n in leaves) if total is None else total",
       "size = max((n for _, n in leaves), default=0) if total is None else total",
       "a tool result split in parts is judged by its largest part, not their sum",
       GUARD_TESTS),
    _m("guard-genuine-parts-not-subtracted", "guard", WALK,
       "raw = size - sum(n for text, n in leaves if self.genuine(text))",
       "raw = size",
       "several genuine stubs in one tool result are judged a split leak",
       GUARD_TESTS),
    _m("guard-any-stub-marker-passes", "guard", WALK,
       "return parse_stub(text, key=key) is not None",
       "return True",
       "anything that starts with a stub marker passes as a stub",
       GUARD_TESTS),
    _m("guard-any-segment-marker-passes", "guard", WALK,
       "return parse_segment(text, key=key) is not None",
       "return True",
       "anything that starts with a recovered-segment marker passes as one",
       GUARD_TESTS),
    _m("segment-digest-unchecked", "guard", SEGMENT,
       "        body = rest\n        if not genuine(body):\n            return None\n",
       "        body = rest\n",
       "a recovered segment's marker digest is not checked against its text",
       GUARD_TESTS, OFFLOAD_TESTS),
    _m("stub-check-unchecked", "guard", STUB,
       "if utf8_len(text) > budget or not same(_check(text[:last_start], secret), last.group(2)):",
       "if utf8_len(text) > budget:",
       "a stub whose content was edited (check line no longer matching) still parses as genuine",
       GUARD_TESTS, STUB_TESTS),
    Mutant(
        "segment-plain-digest-trusted-under-a-key", "guard", SEGMENT,
        (
            Edit(
                'if match is None or (match.group(4) == "mac") != (key is not None):',
                "if match is None:",
            ),
            Edit(
                "            return same(_mac(secret, fields, body), check)",
                "            return same(_mac(secret, fields, body), check) or same(\n"
                "                _digest(body), check\n"
                "            )",
            ),
        ),
        "a segment sealed with the plain SHA-256 (which any tool can compute) passes a keyed check",
        (FORGERY_TESTS, OFFLOAD_TESTS),
        False,
        None,
    ),
    Mutant(
        "segment-mac-omits-its-header", "guard", SEGMENT,
        (
            Edit('"mac " + _mac(check_key(key), fields, text)',
                 '"mac " + _mac(check_key(key), "", text)'),
            Edit("return same(_mac(secret, fields, body), check)",
                 'return same(_mac(secret, "", body), check)'),
        ),
        "a segment's budget or span can be changed without breaking its check",
        (FORGERY_TESTS,),
        False,
        None,
    ),
    _m("guard-keyless-trusts-plain-digests", "guard", WALK,
       "    if key is None:\n        return False\n    if text.startswith(_STUB_START):",
       "    if text.startswith(_STUB_START):",
       "a guard with no key it can read trusts markers sealed with the plain digest",
       FORGERY_TESTS),
    _m("offload-bypass-trusts-plain-digests", "guard", OFFLOAD,
       "segment = None if key is None else parse_segment(value, key=key)",
       "segment = parse_segment(value)",
       "the offload seam passes a tool's forged segment (plain digest) as a bypass",
       FORGERY_TESTS, OFFLOAD_TESTS),
    _m("guard-tool-thresholds-ignored", "guard", WALK,
       "            self.threshold = self.tool_thresholds.get(tool, self.base)",
       "            self.threshold = self.base",
       "the guard judges every tool result at the global threshold, not its per-tool one",
       FORGERY_TESTS),
    _m("guard-fast-path-skips-lower-tool-thresholds", "guard", FORMATS,
       "    threshold = walker.floor\n",
       "    threshold = walker.threshold\n",
       "a chat tool result under the global threshold but over its tool's lower one passes",
       FORGERY_TESTS),
    _m("guard-margin-ignored", "guard", GUARD,
       "allowed = window - self._margin",
       "allowed = window",
       "the window check keeps no margin free below the model's window",
       WINDOW_TESTS),
    _m("guard-estimate-band-ignored", "guard", GUARD,
       "if estimated * high <= allowed:",
       "if estimated <= allowed:",
       "the estimate lets a request through that the real tokenizer could find over the window",
       WINDOW_TESTS),
    # -- stub and offload ------------------------------------------------------------------
    _m("offload-at-threshold-inline", "stub", OFFLOAD,
       "if not findings and len(data) < limit:",
       "if not findings and len(data) <= limit:",
       "a result of exactly the heavy threshold stays inline",
       OFFLOAD_TESTS),
    _m("offload-existing-reference-lost", "stub", OFFLOAD,
       "outcome = OffloadOutcome.EXISTING_REFERENCE if put.existing else OffloadOutcome.OFFLOADED",
       "outcome = OffloadOutcome.OFFLOADED",
       "identical content is reported as a new offload, not an existing reference",
       OFFLOAD_TESTS),
    _m("offload-failure-carries-body", "stub", OFFLOAD,
       "            return self._withheld(exc, size, limit, media, tool, family)\n",
       "            withheld = self._withheld(exc, size, limit, media, tool, family)\n"
       "            raw = data.decode(\"utf-8\", \"replace\")  # MUTANT: the raw body\n"
       "            return OffloadResult(\n"
       "                withheld.outcome, withheld.reason, raw, None, None, withheld.event\n"
       "            )\n",
       "a failed or rejected offload puts the raw body into the conversation",
       OFFLOAD_TESTS, "tests/test_privacy.py"),
    _m("stub-preview-room-ignores-header", "stub", STUB,
       "room = limit - fixed - utf8_len(head) - slack - 1",
       "room = limit - fixed - slack - 1",
       "the preview's room forgets the header: a stub can exceed its budget",
       OFFLOAD_TESTS, STUB_TESTS),
    _m("stub-depends-on-clock", "stub", STUB,
       'f"kept out of context | kind {what} | class {cls.value}\\n"',
       'f"kept out of context | kind {what} | class {cls.value}'
       ' | at {__import__(\'time\').perf_counter_ns() % 997}\\n"',
       "the stub carries a clock reading: the same input no longer gives the same stub",
       STUB_TESTS),
    # -- this session's defences (issues 26 and 29) ------------------------------------------
    Mutant(
        # Both layers: gc's filter of the expired rows, and the check in _blob_path that every
        # caller meets after its own (either alone is unobservable: the other still refuses).
        "local-blob-path-from-any-digest", "store", LOCAL,
        (
            Edit("if all(isinstance(part, str) for part in row[:3]) and is_digest(row[3])",
                 "if all(isinstance(part, str) for part in row[:3])"),
            Edit("if not isinstance(tenant, str) or not is_digest(digest):\n"
                 "            raise MalformedRowError(MALFORMED)",
                 "if not isinstance(tenant, str):\n"
                 "            raise MalformedRowError(MALFORMED)"),
        ),
        "a tampered index row's digest ('../x') is made into a path: gc unlinks outside the root",
        ("tests/test_local_store.py::test_gc_never_unlinks_a_file_outside_the_root_that_an"
         "_expired_row_names",
         "tests/test_local_store.py::test_no_verb_meets_an_untyped_error_or_touches_a_file"
         "_outside_the_root_on_a_bad_row"),
    ),
    _m("query-step-bound-ignored", "read", QUERY,
       'if self._left < 0:\n            raise QueryLimit("steps")',
       'if self._left < -(1 << 62):\n            raise QueryLimit("steps")',
       "a JMESPath query's steps are not bounded: a doubling query runs until the deadline",
       f"{READ_TOOLS_TESTS}::test_a_doubling_query_is_over_budget_with_the_fix",
       READ_TOOLS_TESTS),
    _m("secrets-default-masks", "stub", SECRETS,
       'DEFAULT_POLICY = "redact"',
       'DEFAULT_POLICY = "mask"',
       "by default a result holding credentials is stored as it is (masked), not redacted",
       SECRETS_TESTS),
    _m("offload-redact-keeps-credentials", "stub", OFFLOAD,
       "data = redact_secrets(data, findings, keep_length=not textual)",
       "data = bytes(data)",
       "a redacted result is stored and shown with its credentials, reported as redacted",
       SECRETS_TESTS, OFFLOAD_TESTS),
    _m("guard-opaque-in-any-role", "guard", FORMATS,
       "opaque = _opaque(_ANTHROPIC_OPAQUE, kind) if assistant else None",
       "opaque = _opaque(_ANTHROPIC_OPAQUE, kind)",
       "a user's thinking block hides raw content under its signature, unjudged",
       OPAQUE_TESTS),
    _m("guard-opaque-skips-any-value", "guard", WALK,
       "if inner is None and type(item) is str:",
       "if inner is None:",
       "an opaque key holding a list or an object of raw content is skipped, not judged",
       OPAQUE_TESTS),
)
# fmt: on


# -- the machinery ----------------------------------------------------------------------------


class AuditError(Exception):
    """The run itself cannot be trusted (a stale mutant, a failing baseline, a broken copy)."""


@dataclass(slots=True)
class Result:
    """What one mutant's run gave."""

    name: str
    area: str
    status: str  # killed | timeout | survived | error
    seconds: float
    detail: str
    accepted: bool
    output: str = ""
    """The tail of the pytest output (``--show-output``); not written to the JSON."""


def mutate(text: str, mutant: Mutant) -> str:
    """Apply the mutant's edits to ``text``; each old snippet must occur exactly once."""
    for number, edit in enumerate(mutant.edits, 1):
        count = text.count(edit.old)
        if count != 1:
            raise AuditError(
                f"stale mutant {mutant.name}: edit {number} of {mutant.path} matches {count} "
                "times (expected exactly once); update the mutant to the current source"
            )
        text = text.replace(edit.old, edit.new, 1)
    return text


def selected_tests(project: Path, mutant: Mutant) -> list[str]:
    """The mutant's test files and node ids, globs expanded, each checked to exist."""
    args: list[str] = []
    for spec in mutant.tests:
        file_part = spec.split("::", 1)[0]
        if any(ch in file_part for ch in "*?["):
            args.extend(sorted(glob.glob(spec, root_dir=project)))
        elif (project / file_part).is_file():
            args.append(spec)
        else:
            raise AuditError(f"mutant {mutant.name}: no test file {file_part}")
    if not args:
        raise AuditError(f"mutant {mutant.name}: its tests match no file")
    return list(dict.fromkeys(args))


def select(names: Sequence[str]) -> list[Mutant]:
    """The mutants named (or of the areas named); every mutant when none is."""
    if not names:
        return list(MUTANTS)
    wanted = {n.strip() for name in names for n in name.split(",") if n.strip()}
    known = {m.name for m in MUTANTS} | {m.area for m in MUTANTS}
    unknown = sorted(wanted - known)
    if unknown:
        raise AuditError(f"no mutant or area named: {', '.join(unknown)} (see --list)")
    return [m for m in MUTANTS if m.name in wanted or m.area in wanted]


def check_unique_names() -> None:
    names = [m.name for m in MUTANTS]
    doubles = sorted({n for n in names if names.count(n) > 1})
    if doubles:
        raise AuditError(f"mutant names used twice: {', '.join(doubles)}")


class Sandbox:
    """The project copied once to ``T/main``, with ``T/shared`` linked to ``../shared``."""

    def __init__(self, python: Path, timeout: float) -> None:
        self.python = python
        self.timeout = timeout
        if os.geteuid() == 0 and shutil.which("setpriv") is None:
            raise AuditError("running as root needs setpriv (util-linux) to drop privileges")
        self.base = Path(tempfile.mkdtemp(prefix="cargohold-mutation-"))
        self.project = self.base / "main"
        shared = (ROOT.parent / "shared").resolve()
        if shared.is_dir():
            (self.base / "shared").symlink_to(shared, target_is_directory=True)
        self.project.mkdir()
        for name in COPIED:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, self.project / name, symlinks=True, ignore=IGNORED)
            elif source.exists():
                shutil.copy2(source, self.project / name)
        self.drop: list[str] = []
        self.nobody: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            self.nobody = pwd.getpwnam(UNPRIVILEGED_USER)
            os.chmod(self.base, 0o755)  # the unprivileged runs must reach the copy
            home = self.base / "home"
            home.mkdir()
            os.chown(home, self.nobody.pw_uid, self.nobody.pw_gid)
            self.drop = [
                "setpriv",
                f"--reuid={self.nobody.pw_uid}",
                f"--regid={self.nobody.pw_gid}",
                "--clear-groups",
                "--",
            ]

    def env(self, label: str, *, unprivileged: bool) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CARGOHOLD_", "PYTEST_", "HYPOTHESIS_"))
            and k not in ("PYTHONPATH", "PYTHONSTARTUP")
        }
        hypothesis = self.base / "hypothesis" / label
        hypothesis.mkdir(parents=True, exist_ok=True)
        env.update(
            CI="true",
            PYTHONPATH=str(self.project / "src"),
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONHASHSEED="0",
            HYPOTHESIS_STORAGE_DIRECTORY=str(hypothesis),
        )
        if unprivileged and self.nobody is not None:
            os.chown(hypothesis, self.nobody.pw_uid, self.nobody.pw_gid)
            env["HOME"] = str(self.base / "home")
            env["USER"] = env["LOGNAME"] = UNPRIVILEGED_USER
        return env

    def run(self, argv: Sequence[str], env: dict[str, str], *, unprivileged: bool) -> Run:
        """Run ``argv`` in the copy; on timeout, kill its whole process group."""
        command = [*(self.drop if unprivileged else ()), *argv]
        start = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=self.project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=self.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            timed_out = True
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        return Run(proc.returncode, output, time.monotonic() - start, timed_out)

    def pytest(self, tests: Sequence[str], label: str, *, unprivileged: bool) -> Run:
        env = self.env(label, unprivileged=unprivileged)
        return self.run([str(self.python), *PYTEST, *tests], env, unprivileged=unprivileged)

    def check_shadowing(self) -> None:
        """The copy's ``src`` must be what the tests import, not the editable install."""
        for unprivileged in (False, True) if self.drop else (False,):
            probe = self.run(
                [str(self.python), "-c", "import cargohold; print(cargohold.__file__)"],
                self.env("probe", unprivileged=unprivileged),
                unprivileged=unprivileged,
            )
            found = probe.output.strip().splitlines()[-1:] or [""]
            expected = self.project / "src" / "cargohold" / "__init__.py"
            if probe.code != 0 or Path(found[0]) != expected:
                raise AuditError(
                    f"the copy does not shadow the installed package: imported {found[0]!r},"
                    f" expected {expected}\n{probe.output}"
                )

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class Run:
    code: int | None
    output: str
    seconds: float
    timed_out: bool


_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def _killer(output: str) -> str:
    found = _FAILED.search(output)
    return found.group(1) if found else "(no FAILED line)"


def _tail(output: str, lines: int = 15) -> str:
    return "\n".join(output.rstrip().splitlines()[-lines:])


def run_mutant(box: Sandbox, mutant: Mutant) -> Result:
    """Apply one mutant to the copy, run its tests, restore the file."""
    target = box.project / mutant.path
    original = target.read_text(encoding="utf-8")
    mutated = mutate(original, mutant)
    tests = selected_tests(box.project, mutant)
    try:
        compile(mutated, str(target), "exec")
    except SyntaxError as exc:
        return Result(mutant.name, mutant.area, "error", 0.0, f"syntax: {exc}", False)
    unprivileged = mutant.unprivileged and bool(box.drop)
    try:
        target.write_text(mutated, encoding="utf-8")
        run = box.pytest(tests, mutant.name, unprivileged=unprivileged)
    finally:
        target.write_text(original, encoding="utf-8")
    accepted = mutant.accepted is not None
    tail = _tail(run.output, 40)
    if run.timed_out:
        return Result(mutant.name, mutant.area, "timeout", run.seconds, "timed out", accepted, tail)
    if run.code == 0:
        return Result(mutant.name, mutant.area, "survived", run.seconds, "", accepted, tail)
    if run.code == 1:
        killer = _killer(run.output)
        return Result(mutant.name, mutant.area, "killed", run.seconds, killer, False, tail)
    detail = f"pytest exit {run.code}: {_tail(run.output, 5)}"
    return Result(mutant.name, mutant.area, "error", run.seconds, detail, False, tail)


def baseline(box: Sandbox, mutants: Iterable[Mutant], log: bool) -> float:
    """Run every test the mutants use once, unmutated; any failure stops the audit."""
    groups: dict[bool, list[str]] = {}
    for mutant in mutants:
        unprivileged = mutant.unprivileged and bool(box.drop)
        groups.setdefault(unprivileged, []).extend(selected_tests(box.project, mutant))
    total = 0.0
    for unprivileged, tests in sorted(groups.items()):
        files = list(dict.fromkeys(tests))
        who = f" as {UNPRIVILEGED_USER}" if unprivileged else ""
        if log:
            print(f"baseline{who}: {len(files)} test selections ...", flush=True)
        run = box.pytest(files, f"baseline-{int(unprivileged)}", unprivileged=unprivileged)
        total += run.seconds
        if run.timed_out or run.code != 0:
            raise AuditError(
                f"the unmutated tests fail{who} (exit {run.code}); no mutant result would mean"
                f" anything:\n{_tail(run.output, 30)}"
            )
        if log:
            print(f"baseline{who}: passed in {run.seconds:.0f} s", flush=True)
    return total


def report(results: Sequence[Result], seconds: float, baseline_seconds: float) -> int:
    """Print the table, the score and the survivors; the exit status of the audit."""
    width = max(len(r.name) for r in results)
    print()
    print(f"{'mutant':<{width}}  {'area':<5}  {'result':<8}  {'secs':>5}  detail")
    print(f"{'-' * width}  -----  --------  -----  ------")
    for r in results:
        status = "accepted" if r.status == "survived" and r.accepted else r.status
        detail = r.detail.splitlines()[0] if r.detail else ""
        print(f"{r.name:<{width}}  {r.area:<5}  {status:<8}  {r.seconds:5.1f}  {detail}")
    count = {s: sum(r.status == s for r in results) for s in ("killed", "timeout", "survived")}
    errors = [r for r in results if r.status == "error"]
    accepted = [r for r in results if r.status == "survived" and r.accepted]
    gaps = [r for r in results if r.status == "survived" and not r.accepted]
    caught = count["killed"] + count["timeout"]
    total = len(results)
    real = total - len(accepted)
    print()
    print(
        f"score: {caught}/{total} killed ({100 * caught / total:.0f}%);"
        f" {caught}/{real} of the mutants that are not accepted equivalents"
    )
    print(
        f"killed {count['killed']}, by timeout {count['timeout']},"
        f" survived {count['survived']} ({len(accepted)} accepted), errors {len(errors)}"
    )
    print(f"time: {seconds:.0f} s in all, of which baseline {baseline_seconds:.0f} s")
    by_name = {m.name: m for m in MUTANTS}
    for r in accepted:
        print(f"accepted survivor {r.name}: {by_name[r.name].accepted}")
    for r in gaps:
        print(f"SURVIVED {r.name}: {by_name[r.name].bug}")
    for r in errors:
        print(f"ERROR {r.name}: {r.detail}")
    for m in by_name.values():
        if m.accepted and any(r.name == m.name and r.status == "killed" for r in results):
            print(f"note: accepted survivor {m.name} is now killed; drop its accepted= reason")
    return 1 if gaps or errors else 0


def list_mutants(mutants: Sequence[Mutant]) -> int:
    """Print the mutants, each checked against the live tree (read-only)."""
    stale = 0
    for m in mutants:
        text = (ROOT / m.path).read_text(encoding="utf-8")
        try:
            mutate(text, m)
            state = "ok"
        except AuditError:
            state = "STALE"
            stale += 1
        flags = " [unprivileged]" if m.unprivileged else ""
        flags += " [accepted survivor]" if m.accepted else ""
        print(f"{m.name}  ({m.area}, {m.path}) {state}{flags}")
        print(f"    bug:   {m.bug}")
        print(f"    tests: {' '.join(m.tests)}")
    print(f"{len(mutants)} mutants, {stale} stale")
    return 1 if stale else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run only these mutants or areas (repeatable, or comma-separated)",
    )
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds per test run (default {DEFAULT_TIMEOUT:.0f})",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the unmutated run of the tests (only when you just ran it)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the copy (its path is printed)")
    parser.add_argument(
        "--show-output", action="store_true", help="print the end of each mutant's pytest output"
    )
    args = parser.parse_args(argv)

    try:
        check_unique_names()
        mutants = select(args.only)
        if args.list:
            return list_mutants(mutants)
        python = ROOT / ".venv" / "bin" / "python"
        box = Sandbox(python if python.exists() else Path(sys.executable), args.timeout)
    except AuditError as exc:
        print(f"mutation audit: {exc}", file=sys.stderr)
        return 2

    started = time.monotonic()
    results: list[Result] = []
    try:
        print(f"copy: {box.project} (taken {time.strftime('%Y-%m-%d %H:%M:%S')})", flush=True)
        if box.drop:
            print(f"running as root: unprivileged mutants run as {UNPRIVILEGED_USER}", flush=True)
        for m in mutants:  # every edit checked before anything runs
            mutate((box.project / m.path).read_text(encoding="utf-8"), m)
            selected_tests(box.project, m)
        box.check_shadowing()
        baseline_seconds = 0.0 if args.no_baseline else baseline(box, mutants, log=True)
        for index, m in enumerate(mutants, 1):
            result = run_mutant(box, m)
            results.append(result)
            shown = "accepted survivor" if result.status == "survived" and result.accepted else ""
            detail = result.detail.splitlines()[0] if result.detail else ""
            print(
                f"[{index}/{len(mutants)}] {m.name}: {shown or result.status}"
                f" ({result.seconds:.1f} s) {detail}",
                flush=True,
            )
            if args.show_output and result.output:
                print(result.output, flush=True)
    except AuditError as exc:
        print(f"mutation audit: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.keep:
            print(f"kept: {box.base}")
        else:
            box.close()
    seconds = time.monotonic() - started
    status = report(results, seconds, baseline_seconds)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "seconds": round(seconds, 1),
                    "results": [
                        {k: v for k, v in asdict(r).items() if k != "output"} for r in results
                    ],
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
