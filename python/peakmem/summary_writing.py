"""``to_json`` and ``write`` for a result whose figures are plain data
(``peakmem.Measurement``, ``StepReport``), spelled as ``peakmem.Report``'s:
``to_json(indent=2)`` is the figures as JSON, and ``write(format)`` renders
the result in one of its formats, ``"text"`` (what its repr shows) or
``"json"`` (``to_json``'s), also to a file when given a `path`.

A result defines ``summary()`` (its figures as a dict of JSON values) and
``text()``; these functions do the rest, so every such result writes alike.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

__all__ = ["SummaryFormat", "summary_json", "write_summary"]

SummaryFormat = Literal["text", "json"]
SUMMARY_FORMATS: tuple[str, ...] = ("text", "json")


def summary_json(result: Any, indent: int | None = 2) -> str:
    """``result.summary()`` as JSON."""
    return json.dumps(result.summary(), indent=indent)


def write_summary(result: Any, format: str, indent: int | None = 2, path: str | os.PathLike | None = None,
                  others: str = "") -> str:
    """`result` in `format` (``"text"`` or ``"json"``), written to `path`
    too when given. ValueError naming the formats for any other;
    `others` says where the formats a result lacks are found."""
    if format == "json":
        out = summary_json(result, indent)
    elif format == "text":
        out = result.text()
    else:
        raise ValueError(f"a {type(result).__name__} writes {' or '.join(map(repr, SUMMARY_FORMATS))}, "
                         f"not {format!r}{others}")
    if path is not None:
        with open(path, "w") as f:
            f.write(out)
    return out
