"""How every tool reports: one line on stderr, `TOOL: error: ...` and exit 2, or `TOOL: note: ...`.

A command names itself once, with set_program(), before anything can fail; the
helpers of the other modules then speak in its name.
"""
import sys

_program = "mpiddp-tools"
_escape = True


def set_program(name, escape=True):
    """NAME starts every error and note line; escape=False prints messages as given (scripts/plot's, which
    has never escaped them)."""
    global _program, _escape
    _program, _escape = name, escape


def program():
    return _program


def printable(text):
    """TEXT on one line: newlines, tabs and other unprintable characters (in file names) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def one_line(error):
    """An exception's text on one line."""
    return " ".join(str(error).split()) or type(error).__name__


def reason(error):
    """Why a file operation failed, in a few words: the system's text for an OSError, else the exception's."""
    return error.strerror if isinstance(error, OSError) and error.strerror else one_line(error)


def _line(kind, message):
    return f"{_program}: {kind}: {printable(message) if _escape else message}"


def die(message):
    print(_line("error", message), file=sys.stderr)
    sys.exit(2)


def note(message):
    print(_line("note", message), file=sys.stderr)


def missing_module(module, prefix=""):
    """The one line for a Python module this Python lacks (PREFIX: what needs it, e.g. "--plot ")."""
    die(f"{prefix}needs the Python module {module} (Debian: apt-get install python3-{module}; "
        f"run with /usr/bin/python3 if python3 is another Python)")


def need(module):
    """The module, imported; or the one line saying it is missing."""
    try:
        return __import__(module)
    except ImportError:
        missing_module(module)
