"""The Google emulators as pytest fixtures: started on free loopback ports, stopped after.

* Pub/Sub: ``gcloud beta emulators pubsub start`` (Java, part of the Cloud SDK).
* Cloud Tasks: ``gcloud-tasks-emulator`` from PyPI, installed by ``.ci/run`` into its own
  virtual environment ``.venv-emulators`` (it pins protobuf < 5, which the Google client
  libraries of the service no longer accept); ``REMINDERS_TASKS_EMULATOR_PYTHON`` may point
  at another interpreter that has it.

A missing emulator skips its tests with the reason; under ``REMINDERS_CI`` it fails them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
TASKS_LAUNCHER = Path(__file__).with_name("tasks_emulator_main.py")
EMULATOR_PROJECT = "test-project"
EMULATOR_LOCATION = "here"
START_TIMEOUT_SECONDS = 60.0


def emulator_missing(reason: str) -> NoReturn:
    """Skip, or fail under CI where every emulator must run."""
    if os.environ.get("REMINDERS_CI"):
        pytest.fail(f"REMINDERS_CI is set but {reason}: .ci/run installs it")
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running(command: list[str], log_path: Path, ready: Callable[[], bool]) -> Iterator[None]:
    """Run ``command`` in its own process group until the block ends."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            _wait_until(ready, process, log_path)
            yield
        finally:
            _stop(process)


def _wait_until(ready: Callable[[], bool], process: subprocess.Popen[bytes], log: Path) -> None:
    # Waiting for a program to start listening, not for a lease: there is no clock to move.
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"emulator did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    # The group: gcloud starts Java as a child, which must go too.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def _answers_http(url: str) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    return ready


def _accepts_tcp(port: int) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    return ready


@contextmanager
def pubsub_emulator(workdir: Path) -> Iterator[str]:
    """A Pub/Sub emulator; yields its ``host:port`` (the value of PUBSUB_EMULATOR_HOST)."""
    gcloud = shutil.which("gcloud")
    if gcloud is None or shutil.which("java") is None:
        emulator_missing("the Pub/Sub emulator needs gcloud and java")
    port = free_port()
    data_dir = workdir / "pubsub-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    command = [
        gcloud, "beta", "emulators", "pubsub", "start",
        f"--host-port=127.0.0.1:{port}", f"--data-dir={data_dir}", "--quiet",
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    with running(command, workdir / "pubsub-emulator.log", _answers_http(url)):
        yield f"127.0.0.1:{port}"


def tasks_emulator_python() -> str:
    """The interpreter that has gcloud-tasks-emulator installed."""
    configured = os.environ.get("REMINDERS_TASKS_EMULATOR_PYTHON")
    python = Path(configured) if configured else ROOT / ".venv-emulators" / "bin" / "python"
    if not python.exists():
        emulator_missing(f"gcloud-tasks-emulator's interpreter {python} is missing")
    return str(python)


@contextmanager
def tasks_emulator(workdir: Path, *, max_retries: int = -1) -> Iterator[str]:
    """A Cloud Tasks emulator (retries capped at ``max_retries``); yields its host:port."""
    python = tasks_emulator_python()
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    command = [python, str(TASKS_LAUNCHER), "--port", str(port), "--max-retries", str(max_retries)]
    with running(command, workdir / f"tasks-emulator-{port}.log", _accepts_tcp(port)):
        yield f"127.0.0.1:{port}"


@pytest.fixture(scope="session")
def pubsub_emulator_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Pub/Sub emulator for the session (tests use their own topics)."""
    with pubsub_emulator(tmp_path_factory.mktemp("pubsub")) as host:
        yield host


@pytest.fixture(scope="session")
def tasks_emulator_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Cloud Tasks emulator for the session, retrying forever (tests use own queues)."""
    with tasks_emulator(tmp_path_factory.mktemp("cloudtasks")) as host:
        yield host
