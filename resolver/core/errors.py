"""gpuresolve's exceptions: one root, one class per concept, each mapped to an exit code here.

The CLI asks ``exit_code`` for every ``GpuresolveError`` it catches, so an error a call site
forgot to convert still ends as one line with its concept's exit code, never as exit 70.
"""

from __future__ import annotations


class GpuresolveError(Exception):
    """The root: anything gpuresolve raises on purpose; the message is one line for the user."""


class UserError(GpuresolveError):
    """Bad input (an option, a file, a name): one clear line, exit code 2, never a traceback."""


class DataError(UserError):
    """The compatibility database is malformed; the message names the file and the record."""


# What code reading a parsed file raises where a value has the wrong shape (a list for a mapping,
# a number for text, nesting past the recursion limit) beyond the checks that name the record.
MALFORMED = (KeyError, TypeError, ValueError, AttributeError, RecursionError)


def malformed(subject: str, exc: BaseException) -> DataError:
    """``subject`` ("DIR: malformed database") with what tripped the reader (``MALFORMED``),
    as one line."""
    detail = " ".join(str(exc).split())[:200]
    return DataError(f"{subject} ({type(exc).__name__}: {detail})")


class IndexFormatError(UserError):
    """A page that is not a simple-repository page (garbage, an error page served as 200)."""


EXIT_USAGE = 2  # bad input, or a source we were pointed at that cannot be read
EXIT_INTERNAL = 70  # sysexits.h EX_SOFTWARE: a bug of ours, never 1 ("no compatible build")

# The one place an error concept meets its exit code (the most specific class listed wins).
EXIT_CODES: dict[type, int] = {
    UserError: EXIT_USAGE,  # ReadError (io), FetchError, MetadataError... derive from it
}


def exit_code(exc: GpuresolveError) -> int:
    """The exit code of an error: that of its nearest listed class, EXIT_INTERNAL if none is."""
    for cls in type(exc).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
    return EXIT_INTERNAL


def shown(value: object, limit: int = 60) -> str:
    """A user's value quoted for a one-line message, cut when long (a 5,000-digit "version").

    Text is quoted as ``repr`` quotes it, but escaped by :func:`escaped` (the one rule), not by
    ``repr``'s own."""
    if isinstance(value, str):
        quote = '"' if "'" in value and '"' not in value else "'"
        text = f"{quote}{escaped(value)}{quote}"
    else:
        text = escaped(repr(value))
    return text if len(text) <= limit else f"{text[: limit - 4]}...{text[-1]}"


# --- the one control-character rule --------------------------------------------------------------
#
# Everything gpuresolve prints passes through :func:`escaped` (``commands.ui.echo`` and the CLI's
# error line call it; tests/test_architecture.py fails on a second copy of the rule). Unsafe:
# every control and format character (Unicode Cc and Cf: C0 controls with tab, newline and CR,
# DEL, C1 controls with U+0085, the bidi embeddings and overrides U+202A-202E and isolates
# U+2066-2069, U+200E/200F marks, zero-width ones, the soft hyphen), line and paragraph
# separators (U+2028, U+2029), surrogates, private-use and unassigned characters: they can move
# the cursor, retitle or clear a terminal, or reorder and hide text a reviewer reads. Each is
# written as Python writes it (``\x1b``, ``\x85``, ``\u202e``); a backslash is left as it is,
# so a Windows path reads as written (the escapes are for a person, not to be parsed back).
# A value quoted with ``!r`` in a message is no second rule: Python's repr escapes every character
# this rule names (and the Unicode spaces, which shows them in a refused value), and the printer
# applies this rule to whatever it is given.

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _unsafe(ch: str) -> bool:
    if ch.isascii():
        return ch < " " or ch == "\x7f"
    import unicodedata

    return unicodedata.category(ch) in _UNSAFE_CATEGORIES


def unsafe_char(text: str) -> str | None:
    """The first character of ``text`` that must not reach a terminal or a file raw, if any
    (the rule above)."""
    if text.isascii() and text.isprintable():  # the common case: space to tilde, all safe
        return None
    return next((ch for ch in text if _unsafe(ch)), None)


def plain_text(value: str, what: str) -> str:
    """``value`` when it holds no :func:`unsafe_char`; else a UserError naming the character.

    The rule for input (options, host files, specs, node lists): refused, exit 2.
    """
    ch = unsafe_char(value)
    if ch is not None:
        raise UserError(f"{what}: holds the control or bidi character U+{ord(ch):04X}: refused")
    return value


def escaped(text: str, keep: str = "") -> str:
    """``text`` with each :func:`unsafe_char` but those in ``keep`` written as a visible escape
    (``\\x1b``, ``\\u202e``).

    The rule for output: kept, but never raw. ``keep="\\n"`` (:func:`escaped_lines`) keeps the
    lines of a multi-line text (a diff, a report) and escapes everything else in them."""
    if text.isascii() and text.isprintable():
        return text
    table = {
        ord(ch): ch.encode("unicode_escape").decode("ascii")
        for ch in set(text)
        if ch not in keep and _unsafe(ch)
    }
    return text.translate(table) if table else text


def escaped_lines(text: str) -> str:
    """``text`` escaped by the rule, its ``\\n`` line breaks kept (and only those)."""
    return escaped(text, keep="\n")
