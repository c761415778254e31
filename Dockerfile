# Glass Transformer's images: one Dockerfile, three targets, all built by compose.yaml (README, "Containers").
#
#   app     `streamlit run app.py` (port 8501), and with another command a training queue worker
#           (python -m training.queue_worker); Debian's Python 3.11, the pinned packages, non-root
#   redis   Redis as serving/redis_conf.py configures it (deploy/redis_entrypoint.sh)
#   proxy   HAProxy with deploy/haproxy-compose.cfg (deploy/haproxy_entrypoint.sh)
#
# BASE is any Debian 12 image: debian:bookworm-slim from a registry, or, where none is reachable, one made
# from Debian's packages by deploy/base_image.sh. pip installs from deploy/wheels/ only (--no-index), a
# wheelhouse that deploy/wheelhouse.sh downloads on the host beforehand: torch as its CPU build, never
# the multi-GB CUDA one. The wheels stay in the build stage; the app image has the installed packages.
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS runtime
LABEL org.opencontainers.image.title="Glass Transformer"
ENV LANG=C.UTF-8 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/*

# Redis (Debian's 7.0); python3 runs serving/redis_conf.py, the standard library only.
FROM runtime AS redis
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o redis -g redis -m 0700 /data
WORKDIR /app
COPY serving/redis_conf.py serving/
COPY deploy/redis_entrypoint.sh deploy/
USER redis
EXPOSE 6379
CMD ["/app/deploy/redis_entrypoint.sh"]

# HAProxy (Debian's 2.6).
FROM ${BASE} AS proxy
LABEL org.opencontainers.image.title="Glass Transformer"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/*
COPY deploy/haproxy-compose.cfg /etc/haproxy/haproxy.cfg
COPY deploy/haproxy_entrypoint.sh /usr/local/bin/glass-haproxy
USER haproxy
EXPOSE 8500
CMD ["glass-haproxy"]

# The virtualenv, from the wheelhouse only; then the code, without the wheels.
FROM runtime AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv \
 && rm -rf /var/lib/apt/lists/*
COPY requirements.txt /src/requirements.txt
COPY deploy/wheels/ /wheels/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-index --find-links /wheels \
      -r /src/requirements.txt \
 && /opt/venv/bin/python -c "import sys, torch; sys.exit(0 if '+cpu' in torch.__version__ else f'torch {torch.__version__} is not the CPU build')"
COPY . /src
RUN rm -rf /src/deploy/wheels && /opt/venv/bin/python -m compileall -q /src

FROM runtime AS app
COPY --from=build /opt/venv /opt/venv
COPY --from=build /src /app
RUN useradd --create-home --uid 10001 glass
ENV PATH=/opt/venv/bin:$PATH OMP_NUM_THREADS=1 \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false STREAMLIT_SERVER_HEADLESS=true
WORKDIR /app
USER glass
EXPOSE 8501
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s CMD ["python", "-m", "deploy.healthcheck", "app"]
# secrets from their files into the environment (deploy/entrypoint.py), then the command
ENTRYPOINT ["python", "-m", "deploy.entrypoint"]
# 0.0.0.0 inside the container only: compose.yaml publishes the proxy alone, on 127.0.0.1 by default.
CMD ["streamlit", "run", "app.py", "--server.address", "0.0.0.0", "--server.port", "8501", \
     "--server.fileWatcherType", "none"]
