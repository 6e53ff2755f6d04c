# The dpmstream image: the stream worker (`dpmstream worker`) and every other subcommand.
# Built by docker-compose.yml; also usable alone: docker build -t dpmstream .
FROM python:3.11-slim

# No root at run time; the worker only needs to read its config and write nothing.
RUN useradd --system --create-home --uid 10001 dpmstream
WORKDIR /src
COPY pyproject.toml README.md ./
COPY dpmstream ./dpmstream
COPY parsers ./parsers
COPY streams ./streams
COPY probes ./probes
COPY simulator ./simulator
COPY regex_profiles ./regex_profiles
# The optional compiled line parser: built only where the image has cargo, else skipped.
COPY native ./native
COPY .cargo ./.cargo
RUN pip install --no-cache-dir '.[kafka]' && rm -rf /src

USER dpmstream
WORKDIR /home/dpmstream
ENTRYPOINT ["dpmstream"]
CMD ["--help"]
