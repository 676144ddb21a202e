#!/usr/bin/env bash
# The whole test suite, on a fresh clone with rustup and cargo.
#
# The containerd shim (shim/) builds against two things from the system:
# protoc (containerd's API is protobuf) and libseccomp (youki's
# libcontainer). On Debian or Ubuntu this installs them when missing
# (with sudo unless root); elsewhere, install them first. Then the
# toolchain of rust-toolchain.toml (rustup installs it and its wasm
# target from that file), then `cargo test`.
#
# Tests that need a peer skip with the reason when it is missing (CI
# installs them all): strace, openssl, curl, ip, and containerd with root
# for the shim's container tests, and containernetworking-plugins and
# busybox-static for its CRI tests.
set -euo pipefail
cd "$(dirname "$0")"

missing=""
command -v protoc >/dev/null 2>&1 || missing="$missing protobuf-compiler"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
if ! pkg-config --exists libseccomp 2>/dev/null; then
  missing="$missing libseccomp-dev"
fi
if [ -n "$missing" ]; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "test.sh: installing what the shim builds against:$missing"
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq $missing
  else
    echo "test.sh: install$missing (protoc, pkg-config, libseccomp) and run again" >&2
    exit 1
  fi
fi

rustup toolchain install
cargo test "$@"
