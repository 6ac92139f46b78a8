"""The mpiddp binary, for the tools that ask it (torch_layers: `mpiddp inspect layers`).

Looked for, first found wins:
  1. the environment variable MPIDDP, a path or a name on PATH (the tests set it to the build under test;
     bench.sh passes its own);
  2. an installation: this package in <prefix>/share/mpiddp/python/ -> <prefix>/bin/mpiddp;
  3. a checkout: this package in <checkout>/python/ -> <checkout>/build/mpiddp;
  4. mpiddp on PATH.
"""
import errno
import os
import shutil
import subprocess


class MpiddpError(RuntimeError):
    """No mpiddp binary, or it could not answer: one line, for `TOOL: error: ...`."""


def executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def candidates():
    """(where, path) of the places tried after MPIDDP, in order."""
    python_dir = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # .../python
    share, mpiddp_dir = os.path.split(os.path.dirname(python_dir))
    found = []
    if os.path.basename(python_dir) == "python" and mpiddp_dir == "mpiddp" and os.path.basename(share) == "share":
        found.append(("the installation", os.path.join(os.path.dirname(share), "bin", "mpiddp")))
    found.append(("the checkout", os.path.join(os.path.dirname(python_dir), "build", "mpiddp")))
    return found


def find():
    """The path of the mpiddp binary; MpiddpError (one line) if there is none."""
    env = os.environ.get("MPIDDP")
    if env:
        if os.sep not in env:  # a bare name: on PATH
            env = shutil.which(env) or env
        if not executable(env):
            raise MpiddpError(f"MPIDDP={env!r} is not an executable file")
        return env
    tried = []
    for _, path in candidates():
        if executable(path):
            return path
        tried.append(path)
    on_path = shutil.which("mpiddp")
    if on_path:
        return on_path
    raise MpiddpError(f"no mpiddp binary (looked at {', '.join(tried)} and PATH): set MPIDDP=/path/to/mpiddp")


def run(args, timeout=120):
    """mpiddp ARGS...: (exit code, stdout text, last non-empty stderr line). Never through a shell; raises
    MpiddpError when it cannot be started or runs past TIMEOUT seconds, ValueError for an argument that no
    command line can hold (a NUL character, one over the system's length limit)."""
    path = find()
    try:
        done = subprocess.run([path, *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise MpiddpError(f"{path} {args[0] if args else ''} did not answer within {timeout} s") from None
    except UnicodeError:
        raise ValueError("an argument is not valid text") from None
    except ValueError:
        raise ValueError("an argument holds a NUL character") from None
    except OSError as e:
        if e.errno == errno.E2BIG:
            raise ValueError("an argument is too long for a command line") from None
        raise MpiddpError(f"cannot run {path}: {e.strerror or e}") from None
    errors = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return done.returncode, done.stdout.decode("utf-8", "replace"), (errors[-1] if errors else "")
