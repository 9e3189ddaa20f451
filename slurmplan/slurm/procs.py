"""Small process helpers for the development cluster: is a pid ours and alive, stop it and wait, free ports.

They read ``/proc`` directly (Linux only, like Slurm itself) so that ``down`` can stop exactly the processes
one cluster started, by pid, and confirm they are gone, without matching process names machine-wide.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def is_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie of our own is reaped on the way)."""
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return False
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state not in (b"Z", b"X")


def cmdline(pid: int) -> str:
    raw = _read(f"/proc/{pid}/cmdline") or b""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def environ(pid: int) -> dict[str, str]:
    raw = _read(f"/proc/{pid}/environ") or b""
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def comm(pid: int) -> str:
    return (_read(f"/proc/{pid}/comm") or b"").decode(errors="replace").strip()


def unix_socket_inodes(prefix: str) -> set[str]:
    """Inodes (as ``socket:[N]`` link targets) of the listening Unix sockets whose path starts with ``prefix``."""
    out: set[str] = set()
    for line in (_read("/proc/net/unix") or b"").decode(errors="replace").splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7].startswith(prefix):
            out.add(f"socket:[{fields[6]}]")
    return out


def holds_path(pid: int, prefix: str, sockets: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether ``pid`` has a file under ``prefix`` (or one of ``sockets``) open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix) or target in sockets:
            return True
    return False


def parent_of(pid: int) -> int | None:
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


def all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def descendants(roots: list[int]) -> list[int]:
    """``roots`` and every process below them, parents first."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        ppid = parent_of(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop(0)
        if pid in out:
            continue
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def stop_pids(pids: list[int], timeout: float) -> list[int]:
    """SIGTERM, wait up to ``timeout`` s, then SIGKILL what is left and wait again; returns pids still alive."""
    live = [p for p in pids if is_alive(p)]
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    live = wait_gone(live, timeout)
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return wait_gone(live, 5.0)


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    live = [p for p in pids if is_alive(p)]
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [p for p in live if is_alive(p)]
    return live


def port_free(port: int) -> bool:
    """True if nothing listens on TCP ``port`` (bound the way a server binds, with SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def pick_free_ports(count: int, avoid: set[int], low: int = 10000, high: int = 20000) -> list[int]:
    """``count`` distinct free ports below Linux's ephemeral range, avoiding ``avoid``, and below 20000, where
    the launcher's rendezvous ports (20000 + job id mod 20000, ``launch.dist``) begin: a daemon on a job's
    port would leave its rank 0 unable to listen and its other ranks talking to the daemon."""
    rng = random.Random()
    out: list[int] = []
    for _ in range(50 * count + 100):
        if len(out) == count:
            break
        port = rng.randrange(low, high)
        if port in avoid or port in out or not port_free(port):
            continue
        out.append(port)
    if len(out) < count:
        raise OSError(f"could not find {count} free TCP ports in {low}-{high}")
    return out


def _set_process_name(name: bytes) -> None:
    """Rename the calling process (its ``comm``), so it is not mistaken for one of Slurm's processes."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME


def run_in_keeper(start: Callable[[], str], name: bytes = b"devcluster-keep") -> str:
    """Run ``start`` in a forked keeper process that then stays the parent of what it started.

    A daemon whose parent exits is re-parented to PID 1, and where PID 1 does not reap (as in some
    containers and VMs) every stopped daemon would linger as a zombie. The keeper avoids that: it reaps its
    children as they exit and leaves when none are left. ``start`` returns a text for the caller (or raises,
    and the caller gets the error message as a :class:`RuntimeError`).
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the keeper
        status = 0
        try:
            os.close(read_fd)
            os.setsid()
            _set_process_name(name)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # never hold the caller's pipes open
                os.dup2(devnull, fd)
            try:
                message = "ok\n" + start()
            except BaseException as exc:  # noqa: BLE001 - everything must reach the caller
                message, status = f"error\n{exc}", 1
            os.write(write_fd, message.encode())
            os.close(write_fd)
            while True:
                try:
                    os.wait()
                except ChildProcessError:
                    break
                except InterruptedError:
                    continue
        finally:
            os._exit(status)
    os.close(write_fd)
    chunks = []
    with os.fdopen(read_fd, "rb") as fh:
        chunks.append(fh.read())
    kind, _, text = b"".join(chunks).decode(errors="replace").partition("\n")
    if kind != "ok":
        # the keeper leaves once its last child is reaped; wait a bounded time only: should ``start`` have left
        # a child running, waiting for the keeper would wait for that child (this hung ``devcluster up``)
        deadline = time.monotonic() + 15.0
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(pid, os.WNOHANG)[0] == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
        raise RuntimeError(text or "the keeper process died before it reported")
    return text
