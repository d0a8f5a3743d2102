#!/usr/bin/env bash
# Installs what `cargo build -p kvtool --features peers` needs beyond a Rust toolchain: libclang, for
# the RocksDB bindings. Debian/Ubuntu; run as root.
set -euo pipefail
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev
