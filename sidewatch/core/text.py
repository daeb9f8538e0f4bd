"""Producers' strings made safe for the text outputs (Markdown report, Alertmanager labels and
summary, log lines): control and format characters out, lengths capped, Markdown inert.
Pure: the report, the exporters and the daemon's logging all use it."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from urllib.parse import quote

ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"
REPLACEMENT = "\N{REPLACEMENT CHARACTER}"
# Markdown has no escape that stops a chat's mention (`@channel`, `@here`): the at sign becomes
# its fullwidth twin, which no chat, tracker or renderer takes for a mention.
AT = "\N{FULLWIDTH COMMERCIAL AT}"
# Unicode's own classes: controls (C0, DEL, C1), format characters (bidi overrides and
# isolates, zero-width joiners and spaces, BOM, soft hyphen), line and paragraph separators,
# and lone surrogates (which cannot even be encoded as UTF-8).
_UNSAFE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
# Those that break a line become a space, so that words stay apart; the others U+FFFD, so the
# reader sees that something was there.
_BREAKS = frozenset("\t\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029")
_FAST = re.compile(r"[\x20-\x7e]*")  # printable ASCII: nothing to do
_BACKTICKS = re.compile(r"`+")
# Every ASCII punctuation character may be backslash-escaped in CommonMark; `&`, `<` and `>`
# become entities instead, which Slack and Mattermost read too. `-` and `/` (in every
# requestId) are markup only at a line's start (a list, a rule), where a `-` is escaped.
_MD_PUNCT = re.compile(r"[!\"#$%'()*+,.:;=?\[\\\]^_`{|}~]|^-")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def clean(value: object) -> str:
    """`value` as text without control or format characters."""
    text = str(value)
    if _FAST.fullmatch(text):
        return text
    return "".join(
        (" " if ch in _BREAKS else REPLACEMENT) if unicodedata.category(ch) in _UNSAFE else ch
        for ch in text
    )


def cap(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the cut shown by an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def safe(value: object, limit: int) -> str:
    """Clean and capped: the form of an untrusted value in any text output."""
    return cap(clean(value), limit)


def label(value: str, limit: int = 128) -> str:
    """A value for an alert label, which identifies the alert: clean and at most `limit`
    characters. A value that had to be cut or cleaned ends in `…` and 12 hex digits of its
    SHA-256, so that two different values never share a label."""
    cleaned = clean(value)
    if cleaned == value and len(value) <= limit:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return cleaned[: limit - 13] + ELLIPSIS + digest


def md_code(value: object, limit: int = 200) -> str:
    """An untrusted value as a Markdown code span, in which nothing is markup: no heading,
    link, image, HTML or emphasis. The fence is one backtick longer than any run of backticks
    in the value, and spaces pad a value that starts or ends with one (CommonMark 6.1)."""
    text = safe(value, limit).replace("@", AT)
    if not text.strip(" "):
        return "-" if not text else "` `"
    fence = "`" * (1 + max((len(m) for m in _BACKTICKS.findall(text)), default=0))
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_text(value: object, limit: int = 200) -> str:
    """An untrusted value as Markdown prose that renders as the value itself: every ASCII
    punctuation character escaped, so that nothing in it is markup; without leading or
    trailing spaces (four would start a code block)."""
    text = safe(value, limit).strip().replace("@", AT)
    text = _MD_PUNCT.sub(lambda m: "\\" + m.group(), text)
    return re.sub("[&<>]", lambda m: _ENTITIES[m.group()], text)


def wait_page_url(base: str, request_id: str) -> str:
    """The daemon's page of one wait under `base` (`server.externalUrl`, or "" for a path):
    the id percent-encoded, its `/` too, so that an id holding `..` stays one path segment."""
    return f"{base.rstrip('/')}/ui/waits/{quote(request_id, safe='@:')}"
