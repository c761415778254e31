#!/usr/bin/env bash
# Glass Transformer's one entry point. Sets everything up on a fresh machine, then:
#   ./dev.sh app     start the app           (http://localhost:8501)
#   ./dev.sh test    run every test: lint, types, unit, app (AppTest), processes, services and browser tests (Chromium)
#   ./dev.sh test fast   lint, types, unit and app tests only (no servers, no processes, no browser)
#   ./dev.sh bench   run the benchmark scripts and print their figures
#   ./dev.sh serve   several app processes behind HAProxy, + redis-server and training queue workers
#                    (--replicas N --workers W --port 8500)
# Extra arguments go to streamlit / pytest.
set -euo pipefail
cd "$(dirname "$0")"
cmd=${1:-}
shift || true

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3

setup_python() {
  if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
  fi
  # Reinstall only when the requirement files change.
  stamp=.venv/.requirements.sha256
  want=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    .venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
    echo "$want" > "$stamp"
  fi
  # torch must be the CPU build: a CUDA build means pip ignored the local wheel (see README).
  .venv/bin/python - <<'PYEOF'
import glob, sys, torch
if "+cpu" not in torch.__version__ and glob.glob("/opt/wheels/torch-*cpu*.whl"):
    sys.exit(f"torch {torch.__version__} is not the local CPU build: check pip's config (README, 'Set-up')")
PYEOF
}

setup_chromium() {
  if [ -x /usr/bin/chromium ]; then return; fi
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq -o DPkg::Lock::Timeout=300
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 chromium >/dev/null
  else
    echo "Browser tests need Debian's chromium: sudo apt-get install -y chromium" >&2
    exit 1
  fi
}

# Classroom mode: Redis holds the classes when several app processes serve one class, HAProxy sits in
# front of them (serving/replicas.py); their tests start both (tests/services.py), and PostgreSQL for studies.
setup_services() {
  missing=""
  for tool in redis-server haproxy; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || [ -x "/usr/bin/$tool" ] || missing="$missing $tool"
  done
  # Studies on PostgreSQL (GLASS_DATABASE_URL): their tests start Debian's server themselves (serving/postgres.py).
  compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || missing="$missing postgresql"
  if [ -z "$missing" ]; then return; fi
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq -o DPkg::Lock::Timeout=300
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 $missing >/dev/null
  else
    echo "Classroom tests and ./dev.sh serve need Debian's$missing: sudo apt-get install -y$missing" >&2
    exit 1
  fi
}

export STREAMLIT_BROWSER_GATHER_USAGE_STATS=false STREAMLIT_SERVER_HEADLESS=true

case "$cmd" in
  app)
    setup_python
    exec .venv/bin/streamlit run app.py "$@"
    ;;
  test)
    setup_python
    fast=0
    if [ "${1:-}" = fast ]; then
      shift
      fast=1
    else
      setup_chromium
      setup_services
    fi
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .  # the style: black's at 120 columns (pyproject.toml)
    .venv/bin/mypy  # strict types on the packages pyproject's [tool.mypy] lists
    # The tiers (tests/conftest.py). Unit and app tests compute in this process only, processes tests in a training
    # or command-line process they start: they run on every core (pytest-xdist, each file in one worker). Services
    # and browser tests start servers and wait on them, so they run one at a time, as a class's timings assume.
    # pytest exits 5 when it selects no test: that is a failure here too, unless the other run ran tests (extra
    # arguments such as a file may select from one tier only).
    tiers="unit or app or processes"
    if [ "$fast" = 1 ]; then tiers="unit or app"; fi
    set +e
    .venv/bin/python -m pytest -m "$tiers" -n auto --maxprocesses 4 --dist loadfile "$@"
    first=$?
    if [ "$fast" = 1 ]; then exit "$first"; fi
    .venv/bin/python -m pytest -m "services or browser" "$@"
    second=$?
    set -e
    for rc in "$first" "$second"; do
      if [ "$rc" != 0 ] && [ "$rc" != 5 ]; then exit "$rc"; fi
    done
    if [ "$first" = 5 ] && [ "$second" = 5 ]; then exit 5; fi
    ;;
  serve)
    setup_python
    setup_services
    exec .venv/bin/python -m serving.replicas "$@"
    ;;
  bench)
    setup_python
    for b in bench/bench_*.py; do m=bench.$(basename "$b" .py); echo "== $m"; .venv/bin/python -m "$m"; done
    ;;
  *)
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
