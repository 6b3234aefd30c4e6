"""The warm trainer: a process that has imported TensorFlow, Keras and the train side, but has not
started TensorFlow's runtime, and forks one training process per request (distexp.job.warm_client is its
client, in the job process).

Why a server of our own and not multiprocessing's forkserver: a training process must write to
the pipe the job process pumps into its log, run in a session of its own (the job stops it with
killpg), carry its own environment, directory and command line (TF_CONFIG, the tests' and
users' `ps`), and report its exit status to the job process, which is not its parent.
multiprocessing's forkserver forks `Process` objects whose output, session and exit status stay
the server's concern. This one takes, per request, the command, the environment, the directory
and the output's file descriptor (SCM_RIGHTS over a Unix socket), and sends back the pid, then the
exit code once it has reaped the process.

What keeps a forked trainer equal to a fresh one (docs/facts.md#start-up-cost): importing TensorFlow
does not start its runtime; this process never lists a device or runs an op, and holds one Python
thread (checked before it says it is ready), so each child configures its own logical devices,
threads and collectives as a fresh interpreter would. What differs, on purpose: the objects the
imports made are frozen (gc.freeze), so a child's garbage collections skip them. A child that
outlives the server dies with it (PR_SET_PDEATHSIG), as the server dies with the job process.

Protocol (SOCK_SEQPACKET, one JSON message per packet):
  server -> {"ready": true, "import_s": s}  |  {"ready": false, "error": "..."}
  client -> {"id": n, "module": m, "argv": [...], "env": {...}, "cwd": d}  + one fd (the output)
  server -> {"id": n, "pid": p}  ...later  {"exit": p, "code": c}  (c < 0: killed by signal -c)
"""
from __future__ import annotations

import gc
import importlib
import io
import json
import os
import select
import signal
import socket
import sys
import threading
import time

from distexp import env, errors, stops
from distexp.cluster import netns

# What a training process imports (the train side is imported whole by distexp.train.trainer's
# lazy imports as it runs; these are the ones that cost seconds).
# The list holds every module the default job's trainer imports (checked by
# tests/job/test_warm_slow.py: after the fork it imports no distexp, hydra or sklearn module).
PRELOAD = ("tensorflow", "keras", "distexp.train.trainer", "distexp.train.loops.custom",
           "distexp.train.loops.fit", "distexp.train.loops.evaluate", "distexp.train.probe_phase",
           "distexp.train.split_probes",
           "distexp.train.input_probe",
           "distexp.train.checkpoints", "distexp.train.hardware", "distexp.train.progress",
           "distexp.train.optimizer", "distexp.train.parity_probe", "distexp.train.devices",
           "distexp.models", "distexp.tasks", "distexp.data.loaders", "distexp.tracking",
           "distexp.config.resolved", "distexp.cluster.kinds",
           "distexp.figures.meter", "distexp.figures.flops", "distexp.figures.cpu_peak",
           "distexp.figures.breakdown", "distexp.figures.meaning", "sklearn.datasets",
           "sklearn.datasets.descr", "sklearn.datasets.data", "sklearn.model_selection")
MAX_PACKET = 1 << 20


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional module: the child imports it (or fails) as a fresh one would
            pass


def _send(sock: socket.socket, msg: dict) -> None:
    try:
        sock.send(json.dumps(msg).encode())
    except OSError:  # the job process is gone: nothing to tell
        pass


def serve(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    t0 = time.monotonic()
    # Python's cyclic GC: off while the imports build TensorFlow's millions of objects (a full
    # collection over them took ~0.25 s of the server's start, on the first job's path), then
    # those objects are frozen: the children's collections scan only what each child makes
    # (the docs' recipe for a process that forks without exec: disable, freeze before fork(),
    # enable in the child). Tracing a job's functions allocates a lot: with the TF heap scanned
    # at each full collection, a sweep's later job took ~1.35 s instead of ~1.1 s here.
    gc.disable()
    try:
        preload()
    except Exception as ex:  # noqa: BLE001  (said to the client, which trains cold instead)
        _send(sock, {"ready": False, "error": f"{type(ex).__name__}: {ex}"})
        return
    if threading.active_count() != 1:  # a fork would lose the other threads' state
        _send(sock, {"ready": False, "error": f"{threading.active_count()} Python threads after "
                                              "the imports; a fork needs exactly one"})
        return
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *a: None)  # wakes select through the wakeup fd
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # Slurm's time-limit warning: not our end
    _send(sock, {"ready": True, "import_s": round(time.monotonic() - t0, 3)})
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [], 1.0)
        if wake_r in ready:
            os.read(wake_r, 4096)
        _reap(sock)
        if sock in ready and not _request(sock, (sock, wake_r, wake_w)):
            return  # the job process closed its end: its training processes die with us


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _request(sock: socket.socket, own_fds) -> bool:
    try:
        data, fds, _, _ = socket.recv_fds(sock, MAX_PACKET, 1)
    except OSError:
        return False
    if not data:
        return False
    req = json.loads(data)
    if len(fds) != 1:
        _send(sock, {"id": req.get("id"), "error": f"expected 1 file descriptor, got {len(fds)}"})
        return True
    server = os.getpid()
    gc.freeze()  # what the server holds: never scanned again, here or in the child
    pid = os.fork()
    if pid == 0:
        _child(req, fds[0], server, own_fds)  # never returns
    os.close(fds[0])
    _send(sock, {"id": req["id"], "pid": pid})
    return True


def _child(req: dict, out_fd: int, server: int, own_fds) -> None:
    """In the forked process: become what `python -u -m <module> <argv>` would be, run it, exit."""
    code = 1
    try:
        _become(req, out_fd, server, own_fds)
        module = importlib.import_module(req["module"])
        code = module.entry(req["argv"])
    except SystemExit as ex:
        code = ex.code if isinstance(ex.code, int) else (0 if ex.code is None else 1)
    except BaseException:  # noqa: BLE001  (printed as Python would, then out)
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        _exit(code)


def _become(req: dict, out_fd: int, server: int, own_fds) -> None:
    gc.enable()  # as a fresh interpreter's, over what this process makes (the rest is frozen)
    os.setsid()  # its own process group: the job process stops it with killpg
    stops.die_with_parent()
    if os.getppid() != server:  # the server died between the fork and the prctl
        os._exit(errors.FAILED)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for fd in own_fds:
        try:
            (fd.close() if isinstance(fd, socket.socket) else os.close(fd))
        except OSError:
            pass
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    # `python -u`: unbuffered text streams on the new fds 1 and 2
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", write_through=True)
    os.chdir(req["cwd"])
    _set_title(req)  # before the environment changes: setproctitle claims argv's and environ's
    os.environ.clear()  # memory on its first call, and finds no title space once environ moved
    os.environ.update(req["env"])
    sys.argv = [req["module"], *req["argv"]]
    try:  # cluster=local: the job's network namespace (this process is single-threaded, as it needs)
        netns.join(req["env"].get(env.NETNS))
    except OSError as ex:  # never on the machine's network instead
        print(f"distexp: could not join the job's network namespace ({ex})", flush=True)
        os._exit(errors.FAILED)


def _set_title(req: dict) -> None:
    """The command line `ps` and /proc/<pid>/cmdline show: what a fresh trainer's would be, and its
    task: /proc/<pid>/environ keeps the server's environment, not the one the child runs with."""
    try:
        import setproctitle
    except ImportError:
        return
    title = [sys.executable, "-u", "-m", req["module"], *req["argv"]]
    task = req["env"].get(env.TASK)  # which task of the job (its environ shows the server's)
    setproctitle.setproctitle(" ".join(title + ([f"({env.TASK}={task})"] if task else [])))


def _exit(code: int) -> None:
    """Out, never back into the server's loop. On success a fresh interpreter's exit handlers run
    first (TensorFlow's coordination service winds down with a cluster's processes), without the
    module teardown; a failure skips them, as the fresh trainer does (distexp.train.trainer)."""
    if code == 0:
        try:
            import atexit

            atexit._run_exitfuncs()
        except BaseException:  # noqa: BLE001
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
