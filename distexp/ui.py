"""`python -m distexp.ui`: the MLflow UI, opened on the latest sweep's comparison with no click.

It serves `mlflow server` on the store the jobs in this directory used (the default
sqlite:///<cwd>/outputs/mlflow.db, or --tracking-uri) on 127.0.0.1, or, for an http(s) tracking
server, serves nothing and names that server; either way it prints one URL: the sweep's shared
view (distexp.tracking.view: the view, its URL, and the command a job or sweep prints).

No TensorFlow, no Hydra: this answers in about a second.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Optional, Sequence

from distexp import errors, stops
from distexp.console_lines import WIDTH
from distexp.tracking import lookup
from distexp.tracking.store import redact
from distexp.tracking.view import sweep_view, url


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def server_log() -> Path:
    """Where the server's own output and access log go (not the terminal): under outputs/."""
    return Path(os.getcwd()) / "outputs" / "mlflow-ui.log"


def serve(uri: str, host: str, port: int, log: Path) -> subprocess.Popen:
    """`mlflow server` on the store (the jobs' artifact locations are absolute file URIs), in a
    process group of its own (`stop` ends it all), its start-up lines and access log (~49 lines a
    page load) appended to `log`. Without MLflow's job execution: its job runner starts 7 huey
    consumers for GenAI scoring jobs, ~10 % of a core each while idle, and the runs view needs
    none of them."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:  # the child keeps its own descriptor
        return subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                                 uri, "--host", host, "--port", str(port), "--workers", "1"],
                                start_new_session=True, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT,
                                env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})


def stop(proc: subprocess.Popen) -> None:
    """End the server's whole process group: SIGTERM, then SIGKILL after 10 s."""
    import signal

    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            os.killpg(proc.pid, 0)  # the server is gone; its children may not be yet
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return
        time.sleep(0.5)


def _ready(proc: subprocess.Popen, health: str, timeout: float = 180.0) -> bool:
    """Wait until the server answers (~10-40 s: 12 s on 2 quiet cores, 37 s at load average 15):
    the printed URL then works."""
    import urllib.request

    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(health, timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return True  # slow, but running: print the URL anyway


def who(host: str) -> str:
    if host in ("127.0.0.1", "localhost", "::1"):
        return "only this machine can open it"
    if host in ("0.0.0.0", "::"):
        return ("every machine that can reach this one on that port can open it, with no "
                "login: the runs, their parameters and artifacts are readable and editable")
    return f"every machine that can reach {host} can open it, with no login"


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = None
    if port is None or not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"received {text!r}; valid: a port number, 1 to 65535 "
                                         "(default 5000)")
    return port


def _one_line_error(message: str) -> None:
    """argparse's errors as one line, exit 2 ("argument --port: ..." -> "--port: ...")."""
    print(f"distexp.ui: error: {message.removeprefix('argument ')}", file=sys.stderr)
    sys.exit(errors.BAD_INPUT)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m distexp.ui",
        description="Serve the MLflow UI on this directory's store and print the URL that opens "
                    "the latest sweep's runs (Model training view, filtered, columns chosen).")
    p.error = _one_line_error  # argparse's usage + error: two lines
    p.add_argument("--port", type=_port, default=5000, help="port to listen on (default: 5000)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1,"
                   " this machine only; 0.0.0.0 = every interface, no login)")
    p.add_argument("--sweep-id", default=None, help="a sweep's id (default: the latest sweep)")
    p.add_argument("--tracking-uri", default=None, help="MLflow URI (default: "
                   "sqlite:///<cwd>/outputs/mlflow.db, or $MLFLOW_TRACKING_URI)")
    p.add_argument("--experiment", default=None, help="MLflow experiment (default: the one that "
                   "holds the latest sweep)")
    p.add_argument("--print-url", action="store_true", help="print the URL and exit (serve nothing)")
    a = p.parse_args(argv)
    uri = a.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or lookup.default_uri()
    remote = uri.startswith(("http://", "https://"))
    if not remote and not a.print_url and not _port_free(a.host, a.port):
        print(f"distexp.ui: error: --port: received {a.port}; it is in use on {a.host} (another "
              f"MLflow UI?); pass a free one, e.g. --port {a.port + 1}", file=sys.stderr)
        return errors.BAD_INPUT
    try:
        exp_id, key, sid = sweep_view(uri, a.experiment, a.sweep_id)
    except lookup.LookupFailed as ex:  # view.NoView is one
        print(f"distexp.ui: error: {ex}", file=sys.stderr)
        return errors.BAD_INPUT
    if remote:
        print(f"MLflow tracking server in use: {redact(uri)} (nothing to serve here)")
        print(url(redact(uri), exp_id, key), flush=True)
        return 0
    shown = "127.0.0.1" if a.host in ("0.0.0.0", "::") else a.host
    link = url(f"http://{shown}:{a.port}", exp_id, key)
    what = f"sweep {sid}" if sid else "the latest runs (no sweep in the store yet)"
    if a.print_url:
        print(link, flush=True)
        return 0
    stops.sigterm_as_ctrl_c()  # kill/SIGTERM stops the server as Ctrl-C does
    log = server_log()
    print(f"Starting the MLflow server on {a.host} port {a.port} for {what} (~10-40 s; the URL "
          "follows) ...", flush=True)
    proc = serve(uri, a.host, a.port, log)
    try:
        if not _ready(proc, f"http://{shown}:{a.port}/health"):
            print(f"distexp.ui: error: mlflow server exited with {proc.returncode} before it "
                  f"answered; its output is in {log}", file=sys.stderr)
            return errors.FAILED
        # one URL: the sweep's (the server's own address opens MLflow's GenAI home)
        # within 120 columns: the store, the log and the URL on lines of their own
        print(textwrap.fill(f"MLflow UI on port {a.port} ({who(a.host)}); Ctrl-C stops it.",
                            WIDTH, subsequent_indent="  ") +
              f"\n  store: {redact(uri)}\n  server log: {log}\nOpen {what}:\n  {link}", flush=True)
        return proc.wait()
    except KeyboardInterrupt:
        return errors.INTERRUPTED
    finally:  # whatever ends this process (Ctrl-C, SIGTERM, an error): no server left behind
        stop(proc)


if __name__ == "__main__":
    sys.exit(main())
