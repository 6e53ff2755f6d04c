"""The Dockerfile's image, as far as it can be checked without a Docker engine: the package
installs from exactly the files its build stage COPYs (minus .dockerignore), with the
compiled engine where cargo exists, and its commands start.

The install is the image's own, on this machine: a clean venv (no system site-packages),
`pip install --no-index --no-deps` of a directory holding only the copied files. Its build
requirements (setuptools, setuptools-rust) come from a wheel directory filled once from
PyPI; the runtime dependencies from the project's .venv (a .pth file), so nothing but
dpmstream itself is installed."""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("DPMSTREAM_CACHE", Path.home() / ".cache" / "dpmstream"))
BUILD_REQUIREMENTS = ["setuptools>=68", "wheel", "setuptools-rust>=1.9"]


def instructions(dockerfile: Path) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comment lines dropped."""
    out, pending = [], ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return out


def build_stage_copies(dockerfile: Path) -> list[tuple[str, str]]:
    """(source, destination) of the COPY lines of the first (build) stage."""
    copies, stage = [], 0
    for line in instructions(dockerfile):
        words = shlex.split(line)
        if not words:
            continue
        if words[0].upper() == "FROM":
            stage += 1
        elif words[0].upper() == "COPY" and stage == 1 and not words[1].startswith("--"):
            *sources, dest = words[1:]
            copies += [(src, dest) for src in sources]
    return copies


def ignored(rel: str, patterns: list[str]) -> bool:
    """Whether .dockerignore leaves `rel` (or a folder above it) out of the context."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatch(p, pat) or (pat.startswith("**/") and
                                          fnmatch.fnmatch(p.rsplit("/", 1)[-1], pat[3:]))
               for p in prefixes for pat in patterns)


def copy_as_docker_does(into: Path) -> None:
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for src, dest in build_stage_copies(REPO / "Dockerfile"):
        origin = REPO / src
        if origin.is_dir():
            for path in origin.rglob("*"):
                rel = path.relative_to(REPO).as_posix()
                if path.is_file() and not ignored(rel, patterns):
                    out = into / dest / path.relative_to(origin)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, out)
        else:
            assert not ignored(src, patterns), f"{src} is COPYed but .dockerignore drops it"
            target = into / dest / origin.name if dest.endswith("/") else into / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target)


def build_wheels() -> Path:
    """The build requirements as wheels, fetched from PyPI once."""
    wheels = CACHE / "build-wheels"
    stamp = wheels / ".complete"
    if not stamp.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
                        "--dest", str(wheels), *BUILD_REQUIREMENTS], check=True)
        stamp.touch()
    return wheels


def test_the_build_stage_copies_every_package_folder_of_pyproject():
    import tomllib
    dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    copied = {src.rstrip("/") for src, _ in build_stage_copies(REPO / "Dockerfile")}
    assert set(dirs.values()) <= copied, set(dirs.values()) - copied


@pytest.mark.slow   # a whole pip build of the package, the compiled engine included
def test_the_image_installs_from_its_copied_files_and_its_commands_start(tmp_path):
    # A fixed place (cargo keys its build cache on the package's path and the files' mtimes,
    # which copy2 keeps): after the first run the compiled engine is not built again.
    context = CACHE / "container-context"
    shutil.rmtree(context, ignore_errors=True)
    copy_as_docker_does(context)
    assert (context / "report" / "page.py").is_file()
    assert not (context / "native" / "target").exists()

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    # The dependencies (prometheus-client, aiokafka, ...) from the project's environment;
    # a plain path entry, so the .pth files there (the editable dpmstream) stay inert.
    (site / "deps-from-project-venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    python = venv / "bin" / "python"
    env = {**os.environ, "CARGO_NET_OFFLINE": "true",
           # cargo's build cache outlives the test: a second run compiles nothing again
           "CARGO_TARGET_DIR": str(CACHE / "container-test-target"),
           "PATH": f"{Path.home() / '.cargo' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
         "--no-deps", "--find-links", str(build_wheels()), str(context)],
        env=env, capture_output=True, text=True, timeout=1200)
    assert install.returncode == 0, install.stderr[-3000:]

    where = subprocess.run([str(python), "-c", "import dpmstream; print(dpmstream.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert where.startswith(str(site)), where  # the copy just installed, not the work tree
    for command in (["dpmstream", "worker", "--help"], ["check_dpm", "--help"],
                    ["dpmstream", "report", "--help"]):
        res = subprocess.run([str(venv / "bin" / command[0]), *command[1:]],
                             capture_output=True, text=True, cwd=tmp_path)
        assert res.returncode == 0 and res.stdout.startswith("usage:"), (command, res.stderr)
    if shutil.which("cargo", path=env["PATH"]):
        compiled = subprocess.run(
            [str(python), "-c", "from dpmstream.parsers import fastpath; print(fastpath.available())"],
            capture_output=True, text=True, cwd=tmp_path)
        assert compiled.stdout.strip() == "True", compiled.stderr


@pytest.mark.parametrize("stage_from", ["rust:", "python:3.11-slim"])
def test_the_dockerfile_builds_in_a_rust_stage_and_runs_in_a_slim_one(stage_from):
    froms = [line.split()[1] for line in instructions(REPO / "Dockerfile")
             if line.upper().startswith("FROM ")]
    assert len(froms) == 2 and any(f.startswith(stage_from) for f in froms), froms
