# Glass Transformer in a container: one `streamlit run app.py` per container. compose.yaml runs several
# behind HAProxy, with Redis for classroom mode; alone: docker build -t glass . && docker run -p
# 127.0.0.1:8501:8501 glass
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false STREAMLIT_SERVER_HEADLESS=true OMP_NUM_THREADS=1

WORKDIR /app
COPY requirements.txt .
# torch first, the exact pin of requirements.txt from PyTorch's CPU wheel index: the default index's
# build of the same version pulls several GB of CUDA libraries. Then the rest (torch is satisfied).
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN pip install --index-url "$TORCH_INDEX" "$(grep -E '^torch==' requirements.txt | cut -d' ' -f1)" \
 && pip install -r requirements.txt \
 && python -c "import sys, torch; sys.exit(0 if '+cpu' in torch.__version__ else f'torch {torch.__version__} is not the CPU build')"

RUN useradd --create-home --uid 10001 glass
COPY . .
USER glass

EXPOSE 8501
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
  CMD python -c "import sys, urllib.request as u; sys.exit(u.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=3).read() != b'ok')"
# 0.0.0.0 inside the container only: compose.yaml publishes the proxy alone, on 127.0.0.1.
CMD ["python", "-m", "streamlit", "run", "app.py", "--server.address", "0.0.0.0", "--server.port", "8501", \
     "--server.fileWatcherType", "none"]
