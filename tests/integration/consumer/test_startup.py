"""`logagent run` started wrong, as an operator would: one line on stderr naming the setting, exit code 2.

Real processes: a broker address nothing listens on, an HTTP port another socket holds, TLS files that are
unreadable for the service's user or not PEM at all.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from consumer.cli.config import load_settings
from consumer.settings import ConfigError
from tests.conftest import SettingsFactory
from tests.paths import PROJECT_ROOT
from tests.ports import free_port

pytestmark = pytest.mark.integration

_NOBODY = 65534



def _run(env: dict[str, str]) -> str:
    """`logagent run` with `env`; asserts it exits 2 with one line on stderr and returns that line."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOGAGENT_")}
    proc = subprocess.run([sys.executable, "-m", "consumer.cli", "run"], env={**clean, **env}, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr + proc.stdout[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _load_as(uid: int, env: dict[str, str]) -> str:
    """The ConfigError text `load_settings` raises for `env` in a child process running as `uid`."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop privileges, load, report, exit without running pytest's teardown
        os.close(read_end)
        message = "loaded without error"
        try:
            os.setgid(uid)
            os.setuid(uid)
            for name in [n for n in os.environ if n.startswith("LOGAGENT_")]:
                del os.environ[name]
            os.environ.update(env)
            load_settings(os.environ)
        except ConfigError as error:
            message = str(error)
        except BaseException as error:  # anything else is the test's failure, reported to the parent
            message = f"unexpected {type(error).__name__}: {error}"
        os.write(write_end, message.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        text = reader.read().decode()
    os.waitpid(pid, 0)
    return text


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user may enter (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="logagent-startup-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def _base(tmp: Path) -> dict[str, str]:
    return {"LOGAGENT_DATA_DIR": str(tmp / "data"), "LOGAGENT_HTTP__HOST": "127.0.0.1",
            "LOGAGENT_HTTP__PORT": "0"}


class TestStartupFailures:
    def test_an_unreachable_broker(self, shared_dir: Path) -> None:
        """Nothing listens at the bootstrap address: the line names the variable and what to check."""
        address = f"127.0.0.1:{free_port()}"
        line = _run({**_base(shared_dir), "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": address})
        assert f"LOGAGENT_KAFKA__BOOTSTRAP_SERVERS={address}" in line
        assert "check the address and port" in line

    def test_a_data_dir_that_is_a_file(self, shared_dir: Path) -> None:
        """LOGAGENT_DATA_DIR naming a file ended in a NotADirectoryError traceback: one line now."""
        data = shared_dir / "data-file"
        data.write_text("not a directory\n")
        line = _run({**_base(shared_dir), "LOGAGENT_DATA_DIR": str(data)})
        assert line.startswith("logagent: LOGAGENT_DATA_DIR: ") and "is not a directory this process can write" in line

    def test_a_broker_address_without_a_port(self, shared_dir: Path) -> None:
        """`host:abc` ended in a traceback from deep in the Kafka client: one line now."""
        line = _run({**_base(shared_dir), "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": "broker:abc"})
        assert "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS=broker:abc is invalid: 'broker:abc' is not host[:port]" in line

    @pytest.mark.parametrize("tenant", [" acme", "acme\t", "ac\u200bme"])
    def test_a_pinned_tenant_no_event_could_name(self, shared_dir: Path, tenant: str) -> None:
        """A space around the pinned tenant, or an invisible character in it, would refuse every event as
        `tenant_mismatch`: one line at start instead."""
        line = _run({**_base(shared_dir), "LOGAGENT_INPUT__TENANT": tenant})
        assert line.startswith("logagent: LOGAGENT_INPUT__TENANT=") and "has spaces around it, or a control" in line

    def test_the_http_port_in_use(self, shared_dir: Path, settings_factory: SettingsFactory) -> None:
        """Another socket holds the port: the line names LOGAGENT_HTTP__PORT and the fix."""
        kafka = settings_factory(partitions=1).kafka
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            port = holder.getsockname()[1]
            line = _run({**_base(shared_dir), "LOGAGENT_HTTP__PORT": str(port),
                         "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers})
        assert f"LOGAGENT_HTTP__PORT={port} cannot be served" in line and "pick a free port" in line

    def test_a_tls_file_the_service_user_cannot_read(self, shared_dir: Path) -> None:
        """A CA bundle mounted with the wrong mode: the line names the variable, the uid and the fix."""
        ca = shared_dir / "ca.pem"
        ca.write_text("not read\n")
        ca.chmod(0o000)
        env = {**_base(shared_dir), "LOGAGENT_KAFKA__SECURITY_PROTOCOL": "SSL", "LOGAGENT_KAFKA__SSL_CAFILE": str(ca)}
        # Root reads any file, and an unprivileged user may not be able to start this interpreter (under
        # /root): then the settings are checked in a forked child that dropped to `nobody` first.
        line = _load_as(_NOBODY, env) if os.getuid() == 0 else _run(env)
        assert f"LOGAGENT_KAFKA__SSL_CAFILE={ca}: cannot be read by uid" in line
        assert "fix its mode or owner" in line

    def test_a_tls_file_that_is_not_pem(self, shared_dir: Path) -> None:
        """A readable CA file holding garbage fails when the TLS context is built, before any connection."""
        ca = shared_dir / "ca.pem"
        ca.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
        line = _run({**_base(shared_dir), "LOGAGENT_KAFKA__SECURITY_PROTOCOL": "SSL",
                     "LOGAGENT_KAFKA__SSL_CAFILE": str(ca)})
        assert "TLS setup failed" in line and "LOGAGENT_KAFKA__SSL_CAFILE" in line
