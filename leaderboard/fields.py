"""Constrained field types shared by the results model and the leaderboard models.

Every string the leaderboard stores is free of control characters (C0, DEL, C1),
bidirectional-override characters and lone surrogates, so it prints and renders as what it
says. Name fields (benchmark, scenario, method, model, parameter keys) also follow a slug
pattern that cannot express a path: no backslash, no ``..``, and no ``/`` except the single
``owner/name`` separator of benchmark families (``clip-base2novel/dtd``) and Hub model ids.

The patterns here are written once and used by both the pydantic models and
``leaderboard/schema.json``; the test ``test_leaderboard_schema.py`` holds the two to the same
verdicts.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

FORBIDDEN_CHARS = "[\\u0000-\\u001f\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069\\ud800-\\udfff]"
"""Characters refused in every string (as a regex character class, JSON-escaped form)."""

_FORBIDDEN = re.compile(FORBIDDEN_CHARS)

BENCHMARK_NAME = r"^[a-z0-9][a-z0-9_.-]{0,63}(/[a-z0-9][a-z0-9_.-]{0,63})?$"
SCENARIO_NAME = r"^[a-z0-9][a-z0-9.-]{0,79}$"
METHOD_NAME = r"^[a-z0-9][a-z0-9_.+-]{0,63}$"
MODEL_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,99})?$"
PARAM_KEY = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"
TASK_ID = r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}$"
VERSION = r"^[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,4})?$"
PACKAGE_VERSION = r"^[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}$"
SHA256 = r"^[0-9a-f]{64}$"
GIT_HASH = r"^[0-9a-f]{7,40}$"
DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
HTTPS_URL = r"^https://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?(/[A-Za-z0-9._~:/?#@!$&'()*+,;=%-]*)?$"


def check_text(value: str) -> str:
    """Refuse control, bidi-override and lone-surrogate characters.

    Raises
    ------
    ValueError
        Naming the position and code point of the first bad character.
    """
    bad = _FORBIDDEN.search(value)
    if bad:
        raise ValueError(
            f"character U+{ord(bad.group()):04X} at position {bad.start()} is a control, "
            "bidi-override or surrogate character; remove it"
        )
    return value


def check_no_dotdot(value: str) -> str:
    """Refuse ``..`` in a name so it can never act as a parent-directory step."""
    if ".." in value:
        raise ValueError("contains '..'; names may not look like paths")
    return value


def check_date(value: str) -> str:
    """Require a real calendar date written YYYY-MM-DD."""
    try:
        _dt.date.fromisoformat(value)
    except ValueError as err:
        raise ValueError(f"{value!r} is not a valid date (YYYY-MM-DD)") from err
    return value


def integral(value: Any) -> Any:
    """Accept an integral float (``3.0``) where an integer is expected, as JSON Schema does."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def Text(max_length: int, min_length: int = 0) -> Any:  # noqa: N802 - type factory
    """A string of bounded length with no forbidden characters."""
    return Annotated[
        str,
        StringConstraints(min_length=min_length, max_length=max_length),
        AfterValidator(check_text),
    ]


def Name(pattern: str) -> Any:  # noqa: N802 - type factory
    """A name matching ``pattern``, with no forbidden characters and no ``..``."""
    return Annotated[
        str,
        StringConstraints(pattern=pattern),
        AfterValidator(check_text),
        AfterValidator(check_no_dotdot),
    ]


BenchmarkName = Name(BENCHMARK_NAME)
ScenarioName = Name(SCENARIO_NAME)
MethodName = Name(METHOD_NAME)
ModelName = Name(MODEL_NAME)
ParamKey = Name(PARAM_KEY)
TaskId = Name(TASK_ID)
Version = Name(VERSION)
PackageVersion = Name(PACKAGE_VERSION)
Sha256 = Name(SHA256)
GitHash = Name(GIT_HASH)
DateStr = Annotated[str, StringConstraints(pattern=DATE), AfterValidator(check_date)]
HttpsUrl = Annotated[
    str, StringConstraints(pattern=HTTPS_URL, max_length=500), AfterValidator(check_text)
]

Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Pct = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
JsonInt = Annotated[int, BeforeValidator(integral)]
NonNegInt = Annotated[int, BeforeValidator(integral), Field(ge=0)]
PosInt = Annotated[int, BeforeValidator(integral), Field(ge=1)]

Scalar = bool | int | Finite | Text(500) | None
Param = Scalar | Annotated[list[Scalar], Field(max_length=1000)]
"""A hyper-parameter or partition value: a JSON scalar or a flat list of scalars. Nested
configs are flattened with dotted keys (``optimizer.lr``)."""

Params = Annotated[dict[ParamKey, Param], Field(max_length=200)]
