"""The same hostile byte strings, fed to every reader of every kind of run file.

Each area's hostile-input test parametrizes over :data:`HOSTILE` and asserts
that nothing escapes, the message names the file, and the file is unchanged.
"""
from __future__ import annotations

HOSTILE: dict[str, bytes] = {
    "binary": bytes(range(256)) * 4,
    "non_utf8": b'{"stop": "abort\xff\xfe"}',
    "null": b"null",
    "list": b'["stop", "abort"]',
    "number": b"1e400",
    "nan": b'{"stop": NaN, "value": Infinity}',
    "huge_int": b'{"n": ' + b"9" * 5000 + b"}",
    "deep": b"[" * 5000 + b"]" * 5000,
    "deep_object": b'{"a":' * 3000 + b"1" + b"}" * 3000,
    "torn": b'{"stop": "ab',
    "empty": b"",
    "whitespace": b"  \n\t\n",
    "string": b'"abort"',
}

#: JSONL variants: the hostile strings as lines between two good ones.
def as_lines(good: bytes, bad: bytes) -> bytes:
    return good + b"\n" + bad.replace(b"\n", b" ") + b"\n" + good + b"\n"
