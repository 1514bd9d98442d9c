"""The supervisor a shell command runs under when no sandbox holds it: a subreaper.

``tools.shell_process`` starts it as ``python3 -I -S shell_reaper.py PARENT GRACE -- ARGV...``
(standard library only, and little of that, so it starts in a few milliseconds).
It marks itself a child subreaper, so every process the command leaves behind,
one that starts a new session or forks twice included, is reparented to it
instead of to init and stays in its subtree; and it asks for SIGTERM when
the daemon dies. When told to stop, it ends the whole subtree: SIGTERM (and
SIGCONT), then SIGKILL after ``GRACE`` seconds, until nothing is left; it
reaps everything, and only then exits.

The wire, on standard input (a socket to the daemon): the daemon sends the
command's environment, ``NAME=value`` entries each ended by a NUL byte and
the whole ended by one more; the supervisor answers ``status N`` (the
shell's exit code, negative for a signal) when the shell exits, or
``error MESSAGE`` when it cannot be started. The daemon's end of file (it
shut down its side, or died) means "stop everything now"; so do SIGTERM,
SIGINT and SIGHUP. The command gets no input and the supervisor's standard
output (the daemon's output pipe), which the supervisor itself then lets go.
"""

from __future__ import annotations

import errno
import posix
import select
import sys
import time

TYPE_CHECKING = False  # typing itself is not worth its import time here
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Callable
    from typing import Any
else:
    # posix and _signal rather than os and signal: these pull in enum and more,
    # a third of this process's start-up time.
    import _signal

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05
CONTROL = 0  # the daemon's socket, as standard input

_STOPPING = frozenset({_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP})


def main(argv: list[str]) -> int:
    """Run the command after ``--`` under this subreaper; return when its whole tree is gone."""
    parent, grace, command = int(argv[1]), float(argv[2]), argv[4:]
    prctl = _prctl()
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    prctl(PR_SET_PDEATHSIG, _signal.SIGTERM, 0, 0, 0)
    wake = _wake_on_signals()
    if posix.getppid() != parent:  # the daemon died before the line above: run nothing
        return 0
    env = _read_environment()
    if env is None:
        return 0
    try:
        shell = _spawn(command, env)
    except OSError as exc:
        _tell(f"error {exc.strerror or exc}")
        return 0
    # Let go of the output pipe: the daemon reads it to its end, which now comes
    # when the last process of the command closes it.
    null = posix.open("/dev/null", posix.O_WRONLY)
    posix.dup2(null, 1)
    posix.dup2(null, 2)
    posix.close(null)
    reaper = Reaper(shell)
    _wait_for_stop(reaper, wake)
    reaper.stop_all(grace, wake)
    return 0


def _spawn(command: list[str], env: dict[bytes, bytes]) -> int:
    """Start ``command`` in a session of its own with no input; its pid, or OSError.

    Forked here rather than through ``posix_spawn``, which leaves glibc's two
    internal signals ignored in the program it starts. Every signal is reset to
    its default, as for a program started from a shell.
    """
    errors, report = posix.pipe()  # closed by a successful exec: nothing to read
    pid = posix.fork()
    if pid == 0:
        try:
            posix.setsid()
            null = posix.open("/dev/null", posix.O_RDONLY)
            posix.dup2(null, 0)
            posix.close(null)
            for sig in _signal.valid_signals() - {_signal.SIGKILL, _signal.SIGSTOP}:
                _signal.signal(sig, _signal.SIG_DFL)
            _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
            _exec(command, env)
        except BaseException as exc:  # whatever it was, the parent must hear of it
            code = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EINVAL
            posix.write(report, str(code).encode())
        finally:
            posix._exit(127)
    posix.close(report)
    failed = posix.read(errors, 64)
    posix.close(errors)
    if failed:
        posix.waitpid(pid, 0)
        code = int(failed)
        raise OSError(code, posix.strerror(code))
    return pid


def _exec(command: list[str], env: dict[bytes, bytes]) -> None:
    """``execvpe``: the program by its path, or looked for along the command's PATH."""
    if "/" in command[0]:
        posix.execve(command[0], command, env)
    name = command[0].encode(sys.getfilesystemencoding(), "surrogateescape")
    found: OSError | None = None
    for folder in env.get(b"PATH", b"/usr/local/bin:/usr/bin:/bin").split(b":"):
        try:
            posix.execve((folder or b".") + b"/" + name, command, env)
        except OSError as exc:  # on to the next folder; a real error beats "not there"
            if found is None or found.errno in (errno.ENOENT, errno.ENOTDIR):
                found = exc
    raise found or FileNotFoundError(errno.ENOENT, posix.strerror(errno.ENOENT))


class Reaper:
    """Reaps this process's children and ends its subtree; reports the shell's status once."""

    def __init__(self, shell: int) -> None:
        self.me = posix.getpid()
        self.shell = shell
        self.reported = False

    def reap(self, block: bool = False) -> bool:
        """Collect every child that has exited (all of them when ``block``); whether any
        is left. None left means no descendant left: each one's line passes through a child.
        """
        while True:
            try:
                pid, status = posix.waitpid(-1, 0 if block else posix.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.shell and not self.reported:
                self.reported = True
                _tell(f"status {posix.waitstatus_to_exitcode(status)}")

    def tree(self) -> dict[int, int]:
        """The live descendants (pid: parent pid); no /proc scan once no child is left."""
        return _descendants(self.me) if self.reap() else {}

    def stop_all(self, grace: float, wake: int) -> None:
        """SIGTERM every descendant (and each newcomer), SIGKILL what is left after
        ``grace``, until none remains; then reap them all.

        A process out of reach (a set-uid program's) is given up on, not waited for.
        """
        deadline = time.monotonic() + grace
        termed: set[int] = set()
        tree = self.tree()
        while tree and time.monotonic() < deadline:
            for pid in tree.keys() - termed:
                _send(pid, _signal.SIGTERM, tree)
                _send(pid, _signal.SIGCONT, tree)  # a stopped process acts on it only once woken
            termed |= tree.keys()
            _sleep(wake, min(POLL_S, deadline - time.monotonic()))
            tree = self.tree()
        refused: set[int] = set()
        while tree.keys() - refused:
            refused.update(p for p in tree.keys() - refused if not _send(p, _signal.SIGKILL, tree))
            _sleep(wake, POLL_S / 10)
            tree = self.tree()
        self.reap(block=not tree)


def _wait_for_stop(reaper: Reaper, wake: int) -> None:
    """Reap as children exit until the daemon hangs up or a stopping signal comes, or
    the shell has exited leaving nothing behind (an empty tree cannot grow again)."""
    while True:
        ready, _, _ = select.select([CONTROL, wake], [], [])
        if CONTROL in ready:
            try:
                if not posix.read(CONTROL, 4096):
                    return
            except OSError:
                return
        if wake in ready:
            signals = _drain(wake)
            left = reaper.reap()
            if _STOPPING.intersection(signals) or (reaper.reported and not left):
                return


def _descendants(me: int) -> dict[int, int]:
    """Every live process below ``me`` (pid: parent pid), read from /proc."""
    children: dict[int, list[int]] = {}
    for name in posix.listdir("/proc"):
        if not name.isdigit():
            continue
        parent = _parent(int(name))
        if parent is not None:
            children.setdefault(parent, []).append(int(name))
    tree: dict[int, int] = {}
    parents = [me]
    while parents:
        parent = parents.pop()
        for child in children.get(parent, ()):
            tree[child] = parent
            parents.append(child)
    return tree


def _parent(pid: int) -> int | None:
    """A process's parent pid; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in (b"Z", b"X", b"x") else int(fields[1])


def _send(pid: int, sig: int, tree: dict[int, int]) -> bool:
    """Signal ``pid`` if it is still the process found in the tree; False if refused.

    Through a pidfd: a process that exited and whose pid was reused since the
    scan is not the one signalled.
    """
    try:
        handle = posix.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (OSError, AttributeError):  # no pidfds (Linux before 5.3): the plain kill
        return _quietly(posix.kill, pid, sig)
    try:
        parent = _parent(pid)
        if parent is None or not (parent in tree or parent == posix.getpid()):
            return True
        return _quietly(_signal.pidfd_send_signal, handle, sig)
    finally:
        posix.close(handle)


def _quietly(send: Callable[[int, int], object], target: int, sig: int) -> bool:
    """Send; False if the process is out of reach (a set-uid program's)."""
    try:
        send(target, sig)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return True


def _wake_on_signals() -> int:
    """A pipe that signals (SIGCHLD and the stopping ones) write their numbers to."""
    read, write = posix.pipe()
    posix.set_blocking(read, False)
    posix.set_blocking(write, False)
    for sig in (_signal.SIGCHLD, *_STOPPING):
        _signal.signal(sig, _noted)
    _signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    return read


def _noted(signum: int, frame: object) -> None:
    """The number is on the wake-up pipe already; nothing else to do."""


def _drain(wake: int) -> set[int]:
    signals: set[int] = set()
    try:
        while chunk := posix.read(wake, 256):
            signals.update(chunk)
    except BlockingIOError:
        pass
    return signals


def _sleep(wake: int, seconds: float) -> None:
    """Wait ``seconds``, or less when a signal comes (a child exited)."""
    if seconds > 0:
        select.select([wake], [], [], seconds)
        _drain(wake)


def _read_environment() -> dict[bytes, bytes] | None:
    """The command's environment from the daemon; None if it hung up first."""
    data = b""
    while not (data == b"\0" or data.endswith(b"\0\0")):
        try:
            chunk = posix.read(CONTROL, 65536)
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    pairs = (entry.partition(b"=") for entry in data[:-1].split(b"\0") if entry)
    return {name: value for name, _, value in pairs}


def _tell(line: str) -> None:
    try:
        posix.write(CONTROL, line.encode("utf-8", "replace") + b"\n")
    except OSError:
        return  # the daemon is gone; the tree is stopped all the same


def _prctl() -> Callable[..., int]:
    """libc's ``prctl`` through ctypes' own core (``import ctypes`` would add half
    again to the start-up time); the public module is the fallback."""
    try:
        import _ctypes

        core: Any = _ctypes
        c_int = type("c_int", (core._SimpleCData,), {"_type_": "i"})
        flags = core.FUNCFLAG_CDECL | core.FUNCFLAG_USE_ERRNO
        function = type("function", (core.CFuncPtr,), {"_flags_": flags, "_restype_": c_int})
        libc = type("libc", (), {"_handle": core.dlopen(None, 2)})  # 2: RTLD_NOW
        prctl: Callable[..., int] = function(("prctl", libc))
    except (ImportError, AttributeError, TypeError, OSError):
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    return prctl


if __name__ == "__main__":
    posix._exit(main(sys.argv))  # nothing to flush or finalise: skip the interpreter's exit
