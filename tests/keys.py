"""Real private key files, generated at run time by the tools that write them in the wild (openssl,
ssh-keygen, puttygen), so redaction is tested on real key material and no key text is in the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tool

# name → (tool, its arguments: `OUT` stands for the key file it writes, `PASS` for a passphrase file)
_KEYS: dict[str, tuple[str, list[str]]] = {
    "pkcs8 rsa": ("openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "OUT"]),
    "pkcs8 encrypted": ("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                                    "-aes-256-cbc", "-pass", "file:PASS", "-out", "OUT"]),
    "rsa with headers": ("openssl", ["genrsa", "-traditional", "-aes128", "-passout", "file:PASS", "-out", "OUT",
                                     "1024"]),
    "openssh ed25519": ("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "ci@example", "-f", "OUT"]),
    "ppk v3": ("puttygen", ["-t", "ed25519", "-O", "private", "--new-passphrase", "/dev/null", "-o", "OUT"]),
    "ppk v3 encrypted": ("puttygen", ["-t", "ed25519", "-O", "private", "--new-passphrase", "PASS", "-o", "OUT"]),
    "ppk v2": ("puttygen", ["-t", "ecdsa", "-b", "256", "-O", "private", "--ppk-param", "version=2",
                            "--new-passphrase", "/dev/null", "-o", "OUT"]),
    "ssh2": ("puttygen", ["-t", "rsa", "-b", "1024", "-O", "private-sshcom", "--new-passphrase", "/dev/null",
                          "-o", "OUT"]),
}


def _command(name: str) -> str:
    if name == "puttygen":
        return tool(name)  # from Debian's putty-tools, by `make tools`
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is needed to generate the test's private keys")
    return found


def generate_keys(folder: Path) -> dict[str, str]:
    """One freshly generated private key file per format, by name: its text as the tool wrote it."""
    passphrase = folder / "passphrase"
    passphrase.write_text("correct horse battery staple\n")
    keys: dict[str, str] = {}
    for name, (program, arguments) in _KEYS.items():
        out = folder / name.replace(" ", "_")
        argv = [arg.replace("OUT", str(out)).replace("PASS", str(passphrase)) for arg in arguments]
        subprocess.run([_command(program), *argv], check=True, capture_output=True, timeout=60)
        keys[name] = out.read_text()
    return keys


def secret_lines(key: str) -> list[str]:
    """The lines of a key file that give the key away: its body (base64), not its header, footer or labels."""
    return [line for line in key.splitlines() if len(line) >= 16 and ":" not in line and " " not in line
            and not line.startswith("-")]


def python_trace(key: str, folder: Path) -> str:
    """The traceback real Python prints when an exception's message carries `key`."""
    script = folder / "load_key.py"
    script.write_text("import sys\n\n\ndef load(key):\n    raise ValueError('bad key ' + key)\n\n\n"
                      "load(sys.stdin.read())\n")
    return subprocess.run([sys.executable, str(script)], input=key, capture_output=True, text=True, timeout=60).stderr
