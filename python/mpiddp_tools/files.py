"""Writing outputs safely: never onto an input, never over an existing output without --force, and atomically
(a temporary file next to the output, renamed into place; a failed write leaves nothing behind)."""
import os
import stat
import tempfile

from .errors import die, program, reason


def same_file(a, b):
    """Whether A and B are one file (through links too), or would be once written."""
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def refuse_input(path, input_path, what="the input"):
    """PATH must not be the input (not even with --force, nor through a link); WHAT names the input."""
    if same_file(path, input_path):
        die(f"{path}: is {what} {input_path}; {program()} never writes onto its input (not even with --force)")


def refuse_existing(path, force):
    """PATH may be written: not a directory, and not an existing file unless --force."""
    if os.path.isdir(path):
        die(f"{path}: is a directory")
    if os.path.lexists(path) and not force:
        die(f"{path}: already exists (pass --force to replace it)")


def cannot_write(path, why):
    return f"{path}: cannot write ({why})"


def write_atomically(files, failed=cannot_write):
    """files: [(path, write)]: write(temp) fills a temporary file in PATH's directory (.NAME.*.tmp); once all are
    written they get a new file's permissions (the umask's, not mkstemp's 0600) and are renamed into place. On
    any failure no temporary file stays and the tool stops with failed(path, why), path being the file at hand."""
    temps, current = [], files[0][0]
    try:
        for path, write in files:
            current = path
            fd, temp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                                        prefix="." + os.path.basename(path) + ".", suffix=".tmp")
            os.close(fd)
            temps.append(temp)
            write(temp)
        umask = os.umask(0)
        os.umask(umask)
        for temp in temps:
            os.chmod(temp, 0o666 & ~umask)  # mkstemp's 0600 would outlive the rename
        for (path, _), temp in zip(files, temps):
            current = path
            os.replace(temp, path)
    except BaseException as e:
        for temp in temps:
            try:
                os.remove(temp)
            except OSError:
                pass
        if isinstance(e, Exception):
            die(failed(current, reason(e)))
        raise


def write_bytes(path, data):
    """write(temp) for write_atomically: DATA (bytes) as the file's contents."""
    def write(temp):
        with open(temp, "wb") as f:
            f.write(data)
    return path, write


def refuse_special(path):
    """PATH, if it exists, must be a regular file: reading a FIFO would block for good, a device without end."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing or unreadable: the read itself says so
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        die(f"{path}: not a regular file ({kind})")


def read_lines(path):
    """The lines of a UTF-8 text file (a batch file, runs.tsv); one error line when it cannot be read."""
    refuse_special(path)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError as e:
        die(f"{path}: {e.strerror}")
    except UnicodeDecodeError as e:
        die(f"{path}: not UTF-8 text (byte {e.start})")
