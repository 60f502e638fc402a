# rayscale operator image.
#
# Stage 1 builds the wheel; stage 2 installs it with its dependencies into a virtualenv;
# the final stage copies only that virtualenv onto a slim Python base and runs as an
# unprivileged user. No compiler, pip cache or source tree is left in the image.
#
# Each of the first two stages runs one script of hack/image/, which
# tests/integration/test_install_paths.py also runs (on a clean copy of the repository, then
# `rayscale run` from the virtualenv as UID 65532 against a real API server): no test builds this
# image, but its steps are the tested ones.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY operator ./operator
COPY hack/image/build-wheel.sh ./hack/image/
# The sdist, then the wheel from it; setup.py generates the Ray GCS protobuf bindings (never
# committed) into the wheel with the grpcio-tools of [build-system] requires.
RUN hack/image/build-wheel.sh /src /dist

FROM python:3.11-slim-bookworm AS install
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY hack/image/install.sh ./hack/image/
COPY --from=build /dist /dist
RUN hack/image/install.sh /dist /opt/rayscale

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="rayscale" \
      org.opencontainers.image.description="Kubernetes operator that runs and autoscales Ray clusters" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=install /opt/rayscale /opt/rayscale
RUN groupadd --system --gid 65532 rayscale \
 && useradd --system --uid 65532 --gid rayscale --no-create-home --shell /usr/sbin/nologin rayscale
# LOGNAME: kopf names the operator after getpass.getuser(), which fails for a UID without a passwd
# entry (a securityContext's runAsUser other than 65532, OpenShift's arbitrary UIDs) unless it is set.
ENV PATH=/opt/rayscale/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LOGNAME=rayscale
USER 65532:65532
EXPOSE 8080 8082
ENTRYPOINT ["rayscale", "run"]
