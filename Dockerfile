# The dpmstream image: the stream worker (`dpmstream worker`) and every other subcommand.
# Built by docker-compose.yml; also usable alone: docker build -t dpmstream .
#
# Two stages. `build` has the Rust toolchain and compiles the engine (native/, the
# extension parsers/_native: line parsers and reassembly, 4x the pure-Python speed) into
# a wheel, next to the wheels of the dependencies. The runtime stage has no compiler: it
# installs those wheels only, and refuses to finish if the compiled engine is not in
# them. Both stages are Debian bookworm with Python 3.11, so the wheel built in one loads
# in the other.
# tests/test_container.py installs the package from exactly the files the COPY lines of
# the build stage name: a file the package needs and the Dockerfile forgets fails it.

FROM rust:1-slim-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /venv && /venv/bin/pip install --no-cache-dir --upgrade pip
WORKDIR /src
COPY pyproject.toml README.md ./
COPY dpmstream ./dpmstream
COPY parsers ./parsers
COPY streams ./streams
COPY probes ./probes
COPY simulator ./simulator
COPY regex_profiles ./regex_profiles
COPY report ./report
COPY native ./native
COPY .cargo ./.cargo
RUN /venv/bin/pip wheel --no-cache-dir --wheel-dir /wheels '.[kafka]'

FROM python:3.11-slim-bookworm
# No root at run time; the worker only needs to read its config and write nothing.
RUN useradd --system --create-home --uid 10001 dpmstream
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels 'dpmstream[kafka]' \
    && rm -rf /wheels \
    && python -c "from dpmstream.parsers import fastpath; \
assert fastpath.available(), 'the compiled engine is missing from the wheel'"

USER dpmstream
WORKDIR /home/dpmstream
ENTRYPOINT ["dpmstream"]
CMD ["--help"]
