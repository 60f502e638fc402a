# rayscale operator image.
#
# Stage 1 builds the wheel; stage 2 installs it with its dependencies into a virtualenv;
# the final stage copies only that virtualenv onto a slim Python base and runs as an
# unprivileged user. No compiler, pip cache or source tree is left in the image.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
RUN pip install --no-cache-dir build==1.2.2.post1 grpcio-tools==1.85.1
COPY pyproject.toml README.md ./
COPY operator ./operator
# The Ray GCS protobuf bindings are generated, never committed.
RUN python operator/rayscale/ray/protos/generate.py \
 && python -m build --wheel --outdir /dist

FROM python:3.11-slim-bookworm AS install
COPY --from=build /dist /dist
RUN python -m venv /opt/rayscale \
 && /opt/rayscale/bin/pip install --no-cache-dir /dist/*.whl \
 && /opt/rayscale/bin/pip uninstall --yes pip setuptools wheel

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="rayscale" \
      org.opencontainers.image.description="Kubernetes operator that runs and autoscales Ray clusters" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=install /opt/rayscale /opt/rayscale
RUN groupadd --system --gid 65532 rayscale \
 && useradd --system --uid 65532 --gid rayscale --no-create-home --shell /usr/sbin/nologin rayscale
ENV PATH=/opt/rayscale/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080 8082
ENTRYPOINT ["rayscale", "run"]
