"""JMESPath on a stored JSON body, bounded while it runs.

An expression is the model's, so it may multiply what it works on: ``@ | [@, @]`` repeated doubles
the answer at each step while sharing its parts in memory, so the interpreter builds it in
microseconds and only writing it out as JSON blows up (2**16 copies of a 45 KB body is 3 GB);
``[@, @][]`` repeated doubles real lists; nested projections over such a value visit every copy;
``==`` on two such values compares every copy, in C. Checking the answer's size after it is built
and serialized is too late. So the evaluation itself is bounded:

- *work*: every node the interpreter visits, and every element a node or a function builds or
  scans in C (a flatten, a slice, ``sort``, ``keys``, ``merge``, ``contains``, an equality between
  containers), is a step; past :func:`step_limit` steps (a fixed allowance plus one per two
  bytes of the body, so a query that walks a large document a few times still runs) the
  evaluation stops;
- *size*: a string built while evaluating (``to_string``, ``join``) is measured before it is
  built, and the answer's JSON is measured (a lower bound, in at most ``budget`` steps however
  much of it is shared) before it is written: over the budget, it is never written;
- *depth*: the expression's nesting, at most :data:`MAX_DEPTH` levels, so the interpreter's
  recursion stays far from Python's limit (and the parser's own recursion is caught);
- *time*: a deadline, :data:`DEADLINE_SECONDS`, checked every few thousand steps, as a backstop
  for work the step count does not see.

Over any bound, :func:`evaluate` raises :class:`QueryLimit` naming which bound; the caller answers
``over_budget`` with the fix. A runtime error of the expression (a function given the wrong type,
the wrong number of arguments, an unknown function) is a :class:`QueryFailed` whose message names
the function and the types, never the value (which may be a body's content of any size).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, Literal

import jmespath
import jmespath.exceptions
from jmespath import functions
from jmespath.visitor import Options, TreeInterpreter

from cargohold._errors import UsageError

if TYPE_CHECKING:
    from jmespath.visitor import _TreeNode

MAX_DEPTH: Final = 120
"""Levels of nesting an expression may have (each takes a few interpreter frames)."""
BASE_STEPS: Final = 100_000
"""Steps every query may take, whatever the body's size (a step costs 1-3 us here)."""
BYTES_PER_STEP: Final = 2
"""Further steps, one per this many bytes of the body: a query that walks a big document a few
times still runs (a filter and a projection over a list of records take about one step per 10
bytes)."""
STRING_BYTES_PER_STEP: Final = 8
"""A string built in C (``to_string``, ``join``) costs a step per this many characters."""
DEADLINE_SECONDS: Final = 10.0
"""Wall-clock backstop of one evaluation (the step count is the bound that decides in practice)."""
_CHECK_EVERY: Final = 4096
"""Steps between two looks at the clock."""

Bound = Literal["steps", "size", "depth", "time"]

_TYPE_NAMES: Final = {
    "str": "string",
    "int": "number",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
    "NoneType": "null",
    "_Expression": "expref",
}


class QueryLimit(Exception):
    """The evaluation went over one of its bounds; nothing was answered.

    Attributes:
        bound: ``steps``, ``size``, ``depth`` or ``time``.
        size: For ``size``: the answer's size was at least this many bytes.
    """

    def __init__(self, bound: Bound, size: int = 0) -> None:
        super().__init__(bound)
        self.bound: Bound = bound
        self.size = size


class QueryFailed(Exception):
    """The expression failed on this document; the message says why, without any value."""


class QueryFailedError(UsageError):
    """A JMESPath expression that failed on the document it ran on: a function given a value
    of the wrong type or the wrong number of arguments, an unknown function. The message names
    the function and the types (``length() expects array|object|string, got number``), never
    the value."""

    code = "query_failed"


def step_limit(body_bytes: int) -> int:
    """The steps a query may take on a body of ``body_bytes`` bytes."""
    return BASE_STEPS + max(0, body_bytes) // BYTES_PER_STEP


def compile_expression(expression: str) -> Any:
    """The parsed expression.

    Raises:
        jmespath.exceptions.JMESPathError: not valid JMESPath.
        QueryLimit: nested deeper than the parser recurses (``depth``).
    """
    try:
        return jmespath.compile(expression)
    except RecursionError:
        raise QueryLimit("depth") from None


def evaluate(compiled: Any, document: Any, *, budget: int, body_bytes: int) -> str:
    """``compiled`` evaluated on ``document``, as compact JSON of at most about ``budget`` bytes.

    The text returned may still be over ``budget`` by the difference between the measured lower
    bound and its exact size (escapes, multi-byte characters): the caller checks the exact size.

    Raises:
        QueryLimit: over a bound (the answer's size, the steps, the depth, the deadline).
        QueryFailed: a runtime error of the expression on this document.
        RecursionError: a value of the document nested almost as deep as Python recurses, met
            while comparing or writing it (the caller says the document is too deep).
    """
    interpreter = _Interpreter(step_limit(body_bytes), max(4 << 20, 2 * body_bytes))
    try:
        answer = interpreter.visit(compiled.parsed, document)
        size = serialized_at_least(answer, budget)
        if size > budget:
            raise QueryLimit("size", size)
        # allow_nan=False: Infinity and NaN are not JSON, and the answer is JSON text.
        return json.dumps(answer, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except OverflowError:  # ceil() or floor() of a number read as infinite (1e400)
        raise QueryFailed(NON_FINITE) from None
    except jmespath.exceptions.JMESPathTypeError as exc:
        raise QueryFailed(_type_error(exc)) from None
    except jmespath.exceptions.ArityError as exc:
        raise QueryFailed(_arity_error(exc)) from None
    except jmespath.exceptions.UnknownFunctionError as exc:
        raise QueryFailed(_short(str(exc)) or "unknown function") from None
    except _Unserializable:
        raise QueryFailed(
            "an expression reference (&field) is an argument of sort_by, min_by, max_by or map, "
            "not a value of the answer"
        ) from None
    except ValueError as exc:  # a number too long to write (Python's 4,300-digit limit)
        if isinstance(exc, jmespath.exceptions.JMESPathError):
            raise QueryFailed(_short(type(exc).__name__)) from None
        if _non_finite(exc):  # NaN to an integer, or Infinity/NaN written out as JSON
            raise QueryFailed(NON_FINITE) from None
        raise QueryFailed("the answer holds a number too long to write as text") from None


NON_FINITE: Final = (
    "a number is not finite (one of the document past a double's range, as 1e400, reads as "
    "infinite, and a sum can overflow): no function takes it and JSON cannot write it"
)
"""Why a query met a non-finite number: a function refused it or the answer would hold it."""


def _non_finite(exc: ValueError) -> bool:
    """Whether ``exc`` is a non-finite float's: ``int(nan)`` or ``json.dumps(inf,
    allow_nan=False)`` (the standard library's own messages, the only way to tell)."""
    text = str(exc)
    return text.startswith("Out of range float values") or "float NaN" in text


class _Unserializable(Exception):
    """A value JSON cannot carry (an expression reference)."""


def serialized_at_least(value: Any, cap: int) -> int:
    """A lower bound of the bytes of ``value`` as compact JSON, exact for ASCII text without
    escapes; the count stops once it is past ``cap``.

    Each value counted adds at least one byte, so at most ``cap + 1`` values are looked at,
    however many times a shared part of ``value`` repeats. Iterative: no depth limit.
    """
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            total += len(item) + 2
        elif kind is list:
            total += len(item) + 1 if item else 2  # brackets, and a comma between items
            stack.extend(item[: cap + 1])
        elif kind is dict:
            total += len(item) + 1 if item else 2
            for key in item:
                total += len(key) + 3  # "key":
                if total > cap:
                    break
            stack.extend(list(item.values())[: cap + 1])
        elif kind is bool or item is None:
            total += 4
        elif kind is int:
            total += (item.bit_length() * 1233 >> 12) + 1  # its decimal digits, at least
        elif kind is float:
            total += 3
        else:
            raise _Unserializable
        if total > cap:
            return total
    return total


class _Functions(functions.Functions):
    """The built-in functions, each charged for the work it does in C, strings measured before
    they are built."""

    def __init__(self, interpreter: _Interpreter) -> None:
        self._interpreter = interpreter

    def call_function(self, function_name: str, resolved_args: Iterable[Any]) -> Any:
        if function_name not in self.FUNCTION_TABLE:
            known = ", ".join(sorted(self.FUNCTION_TABLE))
            raise QueryFailed(
                _short(f"there is no function {function_name}()") + f"; JMESPath has {known}"
            )
        resolved_args = list(resolved_args)
        interpreter = self._interpreter
        for arg in resolved_args:
            if isinstance(arg, list | dict):  # sort, keys, values, merge, reverse, sum... scan it
                interpreter.charge(len(arg))
        if function_name == "contains" and len(resolved_args) == 2:
            subject, search = resolved_args
            if isinstance(subject, list) and isinstance(search, list | dict):
                # each element compared with a container: as costly as the container is large
                interpreter.charge(len(subject) * interpreter.size(search))
        elif function_name == "join" and len(resolved_args) == 2:
            separator, array = resolved_args
            if isinstance(separator, str) and isinstance(array, list):
                length = len(separator) * len(array)
                for item in array:
                    length += len(item) if isinstance(item, str) else 0
                interpreter.grow(length)
        elif function_name == "to_string" and len(resolved_args) == 1:
            arg = resolved_args[0]
            if not isinstance(arg, str):
                # measured no further than what could still be afforded: the walk is bounded too
                room = min(interpreter.max_string, interpreter.left * STRING_BYTES_PER_STEP)
                interpreter.grow(serialized_at_least(arg, max(room, 0)))
        return super().call_function(function_name, resolved_args)


class _Interpreter(TreeInterpreter):
    """jmespath's own interpreter, counting its steps and depth as it goes."""

    def __init__(self, steps: int, max_string: int) -> None:
        super().__init__(Options(custom_functions=_Functions(self)))
        self._left = steps
        self._depth = 0
        self._next_check = steps - _CHECK_EVERY
        self._methods: dict[str, Callable[..., Any]] = {}
        self._deadline = time.monotonic() + DEADLINE_SECONDS
        self.max_string = max_string

    def charge(self, steps: int) -> None:
        """Count ``steps`` of work; over the limit (or past the deadline), stop."""
        self._left -= steps
        if self._left < 0:
            raise QueryLimit("steps")
        if self._left < self._next_check:
            self._next_check = self._left - _CHECK_EVERY
            if time.monotonic() > self._deadline:
                raise QueryLimit("time")

    @property
    def left(self) -> int:
        """Steps still allowed."""
        return self._left

    def grow(self, length: int) -> None:
        """A string of about ``length`` characters is about to be built."""
        if length > self.max_string:
            raise QueryLimit("size", length)
        self.charge(length // STRING_BYTES_PER_STEP)  # and so all strings built, together

    def size(self, value: Any) -> int:
        """How many values ``value`` holds, counted up to the steps left (then stop)."""
        count = serialized_at_least(value, max(self._left, 0))
        self.charge(count)
        return count

    def visit(self, node: _TreeNode, *args: Any, **kwargs: Any) -> Any:
        # The hot path: one call per node visited. No try/finally: an exception ends the
        # evaluation (nothing in it catches one), so the depth need not be restored then.
        self._left -= 1
        if self._left < self._next_check:
            self.charge(0)
        depth = self._depth = self._depth + 1
        if depth > MAX_DEPTH:
            raise QueryLimit("depth")
        method = self._methods.get(node["type"])
        if method is None:
            found: Callable[..., Any] = getattr(self, "visit_" + node["type"], self.default_visit)
            method = self._methods[node["type"]] = found
        result = method(node, *args, **kwargs)
        self._depth = depth - 1
        return result

    def visit_comparator(self, node: _TreeNode, value: Any) -> Any:
        if node["value"] not in ("eq", "ne"):
            return super().visit_comparator(node, value)
        left = self.visit(node["children"][0], value)
        right = self.visit(node["children"][1], value)
        if left is not right and isinstance(left, list | dict) and isinstance(right, list | dict):
            # Python compares containers element by element in C: as costly as the smaller one
            self.charge(min(self.size(left), self.size(right)))
        return self.COMPARATOR_FUNC[node["value"]](left, right)

    def visit_flatten(self, node: _TreeNode, value: Any) -> Any:
        base = self.visit(node["children"][0], value)
        if not isinstance(base, list):
            return None
        self.charge(len(base))
        self.charge(sum(len(element) for element in base if isinstance(element, list)))
        merged: list[Any] = []
        for element in base:
            if isinstance(element, list):
                merged.extend(element)
            else:
                merged.append(element)
        return merged

    def visit_slice(self, node: _TreeNode, value: Any) -> Any:
        if not isinstance(value, list):
            return None
        bounds: list[Any] = list(node["children"])  # a slice node's children: start, stop, step
        picked = slice(*bounds)
        self.charge(len(range(len(value))[picked]))
        return value[picked]


def _kind(name: str) -> str:
    return _TYPE_NAMES.get(name, name)


def _short(text: str, most: int = 120) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def _type_error(exc: jmespath.exceptions.JMESPathTypeError) -> str:
    """``length() expects array|string|object, got number``: the function and the types, never
    the value."""
    expected = "|".join(sorted(str(kind) for kind in exc.expected_types or ()))
    actual = str(exc.actual_type)
    # jmespath names the type of an array's element by its Python name (``str``), of the
    # argument itself by its JMESPath name (``string``): the two sets do not overlap.
    got = f"an array holding {_kind(actual)}" if actual in _TYPE_NAMES else _kind(actual)
    return _short(f"{exc.function_name}() expects {expected or 'another type'}, got {got}")


def _arity_error(exc: jmespath.exceptions.ArityError) -> str:
    plural = "" if exc.expected_arity == 1 else "s"
    least = "at least " if isinstance(exc, jmespath.exceptions.VariadictArityError) else ""
    return _short(
        f"{exc.function_name}() takes {least}{exc.expected_arity} argument{plural}, "
        f"got {exc.actual_arity}"
    )
