"""The container recipe, read without Docker: compose.yaml's structure, the Dockerfile's targets and the
helpers the images run (deploy/entrypoint.py, deploy/make_secrets.py). Running it for real takes a Docker
daemon and minutes of building: `python -m deploy.container_check` (docs/operators.md, "Containers"), not a test.
"""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
import yaml

from deploy import healthcheck
from deploy.entrypoint import MissingSecret, secret_environment, with_password
from deploy.make_secrets import SECRETS, make_secrets
from serving.redis_conf import WORKER_USER, redis_conf

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
SECRET_WORDS = re.compile(r"PASSWORD|SECRET|COOKIE_KEY|TOKEN", re.I)


def words(value) -> str:
    """A command, entrypoint or health check as one string."""
    return value if isinstance(value, str) else " ".join(map(str, value or []))


def test_the_stack_has_every_part():
    assert set(SERVICES) == {"redis", "app", "worker", "proxy"}
    assert SERVICES["worker"]["command"] == ["python", "-m", "training.queue_worker"]
    # app and worker run one image, built from the Dockerfile's targets
    assert SERVICES["app"]["image"] == SERVICES["worker"]["image"]
    targets = set(re.findall(r"^FROM \S+ AS (\w+)$", DOCKERFILE, re.M))
    for name, service in SERVICES.items():
        assert service["build"]["target"] in targets, name
        assert service["build"]["args"]["BASE"].startswith("${GLASS_BASE_IMAGE:-"), name
    assert DOCKERFILE.index("ARG BASE=") < DOCKERFILE.index("FROM ")


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_service_restarts_and_has_a_health_check(name):
    service = SERVICES[name]
    assert service.get("restart") in ("always", "unless-stopped"), f"{name}: no restart policy"
    check = service.get("healthcheck") or {}
    assert check.get("test") and not check.get("disable"), f"{name}: no health check"
    assert check["test"][0] in ("CMD", "CMD-SHELL")
    assert service.get("init") is True, f"{name}: a real PID 1 (signals, reaped children)"


def test_health_checks_check_the_real_thing():
    assert words(SERVICES["app"]["healthcheck"]["test"]).endswith("deploy.healthcheck app")
    assert healthcheck.APP_HEALTH.endswith(":8501/_stcore/health")
    assert words(SERVICES["worker"]["healthcheck"]["test"]).endswith("deploy.healthcheck worker")
    redis = words(SERVICES["redis"]["healthcheck"]["test"])
    assert "REDISCLI_AUTH=" in redis and "/run/secrets/redis_password" in redis and "ping" in redis
    proxy = words(SERVICES["proxy"]["healthcheck"]["test"])
    port = re.search(r"/dev/tcp/127\.0\.0\.1/(\d+)", proxy)[1]
    haproxy = (ROOT / "deploy" / "haproxy-compose.cfg").read_text()
    assert re.search(rf"bind 127\.0\.0\.1:{port}\n\s+monitor-uri /health", haproxy)


def test_the_worker_health_check_reads_the_workers_heartbeats():
    from training.queue_worker import HEARTBEAT_SECONDS
    from training.redis_queue import key

    assert healthcheck.WORKERS_KEY == key("workers")
    assert healthcheck.FRESH_SECONDS >= 3 * HEARTBEAT_SECONDS


def test_no_password_on_a_command_line_or_in_the_environment():
    text = (ROOT / "compose.yaml").read_text()
    assert "requirepass" not in text and "--pass" not in text and "-a " not in text
    for name, service in SERVICES.items():
        for part in ("command", "entrypoint"):
            assert not SECRET_WORDS.search(words(service.get(part))), f"{name}: a secret on its {part}"
        for variable, value in (service.get("environment") or {}).items():
            if SECRET_WORDS.search(variable):
                # the path of a secret file, never a value (or a default one)
                assert variable.endswith("_FILE") and str(value).startswith("/run/secrets/"), f"{name}: {variable}"
            if str(value).startswith("redis://"):
                assert urllib.parse.urlsplit(value).password is None, f"{name}: a password in {variable}"


def test_every_secret_is_a_required_file():
    declared = COMPOSE["secrets"]
    assert set(declared) == set(SECRETS)
    for name, secret in declared.items():
        variable = SECRETS[name]
        assert re.fullmatch(rf"\$\{{{variable}:\?[^}}]+\}}", secret["file"]), f"{name}: not required"
    used = {s for service in SERVICES.values() for s in service.get("secrets", [])}
    assert used == set(declared)
    # no secret has a public default anywhere
    assert not re.search(r"\$\{[A-Z_]*(PASSWORD|SECRET|COOKIE_KEY)[A-Z_]*:-", (ROOT / "compose.yaml").read_text())


def test_compose_refuses_to_start_without_its_secrets():
    """Interpolated as Compose does: each ${VAR:?...} missing is an error naming how to make the secrets."""
    text = (ROOT / "compose.yaml").read_text()
    required = set(re.findall(r"\$\{(\w+):\?", text))
    assert required == set(SECRETS.values())


def test_apps_and_workers_have_their_own_redis_users():
    app, worker = SERVICES["app"]["environment"], SERVICES["worker"]["environment"]
    assert app["GLASS_REDIS_URL"] == "redis://redis:6379/0"  # the default user
    assert app["GLASS_REDIS_PASSWORD_FILE"] == "/run/secrets/redis_password"
    assert worker["GLASS_REDIS_URL"] == f"redis://{WORKER_USER}@redis:6379/0"
    assert worker["GLASS_REDIS_PASSWORD_FILE"] == "/run/secrets/redis_worker_password"
    assert SERVICES["worker"]["secrets"] == ["redis_worker_password"]  # never the app's password
    assert "cookie_secret" in SERVICES["app"]["secrets"]
    assert SERVICES["app"]["environment"]["STREAMLIT_SERVER_COOKIE_SECRET_FILE"] == "/run/secrets/cookie_secret"
    redis = SERVICES["redis"]["environment"]
    assert redis["GLASS_REDIS_WORKER_PASSWORD_FILE"] == "/run/secrets/redis_worker_password"


def test_redis_keeps_its_data_and_has_a_ceiling():
    redis = SERVICES["redis"]
    assert "redis-data:/data" in redis["volumes"] and "redis-data" in COMPOSE["volumes"]
    script = (ROOT / "deploy" / "redis_entrypoint.sh").read_text()
    assert "serving.redis_conf --bind 0.0.0.0 --port 6379 --data-dir /data" in script
    assert "redis-server -" in script  # the config on standard input
    assert redis["environment"]["GLASS_REDIS_MAXMEMORY"].startswith("${GLASS_REDIS_MAXMEMORY:-")
    conf = redis_conf("p" * 16, "w" * 16, bind="0.0.0.0", data_dir="/data")
    assert "appendonly yes" in conf and "maxmemory-policy noeviction" in conf and f"user {WORKER_USER} on" in conf


def test_only_the_proxy_is_published_and_it_alone_is_trusted():
    for name, service in SERVICES.items():
        assert ("ports" in service) == (name == "proxy"), name
    assert SERVICES["proxy"]["ports"] == ["${GLASS_BIND:-127.0.0.1}:${GLASS_PORT:-8500}:8500"]
    assert COMPOSE["networks"]["backend"]["internal"] is True
    for name in ("redis", "app", "worker"):
        assert SERVICES[name]["networks"] == ["backend"], name
    trusted = SERVICES["app"]["environment"]["FORWARDED_ALLOW_IPS"]
    assert "*" not in trusted
    assert trusted == SERVICES["proxy"]["networks"]["backend"]["ipv4_address"]
    default = re.fullmatch(r"\$\{GLASS_PROXY_ADDRESS:-([\d.]+)\}", trusted)[1]
    subnet = re.fullmatch(
        r"\$\{GLASS_BACKEND_SUBNET:-([\d./]+)\}", COMPOSE["networks"]["backend"]["ipam"]["config"][0]["subnet"]
    )[1]
    import ipaddress

    assert ipaddress.ip_address(default) in ipaddress.ip_network(subnet)


def test_pip_in_the_image_uses_the_wheelhouse_only():
    installs = re.findall(r"^[^#\n]*\bpip install\b.*$", DOCKERFILE, re.M)
    assert installs and all("--no-index" in i and "--find-links /wheels" in i for i in installs)
    assert "'+cpu' in torch.__version__" in DOCKERFILE
    assert "rm -rf /src/deploy/wheels" in DOCKERFILE  # the wheels stay in the build stage


def test_the_entrypoint_puts_secrets_where_the_app_reads_them(tmp_path):
    (tmp_path / "pw").write_text("a/b+c=d_e-f~g.h12345\n")
    (tmp_path / "cookie").write_text("c" * 40)
    env = secret_environment(
        {
            "GLASS_REDIS_URL": f"redis://{WORKER_USER}@redis:6379/0",
            "GLASS_REDIS_PASSWORD_FILE": str(tmp_path / "pw"),
            "STREAMLIT_SERVER_COOKIE_SECRET_FILE": str(tmp_path / "cookie"),
        }
    )
    assert env["GLASS_REDIS_URL"] == f"redis://{WORKER_USER}:a%2Fb%2Bc%3Dd_e-f~g.h12345@redis:6379/0"
    assert env["STREAMLIT_SERVER_COOKIE_SECRET"] == "c" * 40
    import redis

    parsed = redis.connection.parse_url(env["GLASS_REDIS_URL"])
    assert (parsed["username"], parsed["password"], parsed["host"]) == (WORKER_USER, "a/b+c=d_e-f~g.h12345", "redis")
    assert with_password("redis://redis:6379/0", "x" * 16) == f"redis://:{'x' * 16}@redis:6379/0"


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_a_missing_or_empty_secret_stops_the_container(tmp_path, content):
    path = tmp_path / "pw"
    if content is not None:
        path.write_text(content)
    with pytest.raises(MissingSecret):
        secret_environment({"GLASS_REDIS_URL": "redis://redis:6379/0", "GLASS_REDIS_PASSWORD_FILE": str(path)})
    r = subprocess.run(
        [sys.executable, "-m", "deploy.entrypoint", "true"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"GLASS_REDIS_URL": "redis://redis:6379/0", "GLASS_REDIS_PASSWORD_FILE": str(path)},
    )
    assert r.returncode == 78 and "GLASS_REDIS_PASSWORD_FILE" in r.stderr


def test_make_secrets_writes_files_and_an_env_file_naming_them(tmp_path):
    env_file = make_secrets(tmp_path / "s")
    values = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if not line.startswith("#"))
    assert set(values) == set(SECRETS.values())
    first = {v: Path(p).read_text() for v, p in values.items()}
    assert all(len(s.strip()) >= 40 for s in first.values()) and len(set(first.values())) == len(first)
    assert (tmp_path / "s").stat().st_mode & 0o777 == 0o700
    make_secrets(tmp_path / "s")  # again: the same secrets
    assert {v: Path(p).read_text() for v, p in values.items()} == first


def test_publishing_redis_for_workers_elsewhere_is_a_deliberate_override():
    override = yaml.safe_load((ROOT / "deploy" / "compose.workers-elsewhere.yaml").read_text())
    assert set(override["services"]) == {"redis"}
    (port,) = override["services"]["redis"]["ports"]
    assert port.startswith("${GLASS_REDIS_BIND:?") and port.endswith(":6379")
