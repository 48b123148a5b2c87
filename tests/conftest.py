"""Shared fixtures: tiny configs, a tiny local corpus, and a private cache so tests never touch ~/.cache; and the
``extras`` marker, which skips a test whose optional extras are not installed, naming them."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from warm_python import close_all

# Triton's CPU interpreter for the kernel tests (tests/ops): triton reads this when it is first imported,
# which importing torch._dynamo already does, so it must be set before any test module imports torch.
os.environ.setdefault("TRITON_INTERPRET", "1")
# Runs here must never reach the network or a login prompt.
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Two xdist workers share two cores: torch's thread pool of one thread each (the tiny models here gain nothing from
# a second thread, and two pools of two would fight over the cores). Read when torch loads, so set before.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

TINY = [
    "model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.seq_len=32",
    "train.max_steps=20", "train.batch_size=4", "train.eval_every=10", "train.eval_batches=2",
    "monitor.every=5", "optim.warmup_steps=5", "logger=none", "train.progress=false",
]


def missing_extras(names: list[str]) -> list[str]:
    """The optional extras among ``names`` whose packages are not installed. The extras and their packages are
    read from normtrain's installed metadata, so pyproject.toml's [project.optional-dependencies] is the one list."""
    requires = [Requirement(r) for r in project_requires()]
    missing = []
    for name in names:
        packages = [r for r in requires  # those a marker ties to this extra (not triton's sys_platform)
                    if r.marker and r.marker.evaluate({"extra": name}) and not r.marker.evaluate({"extra": ""})]
        if not packages:
            raise pytest.UsageError(f"@pytest.mark.extras({name!r}): pyproject.toml has no such optional extra")
        if not all(installed(r) for r in packages):
            missing.append(name)
    return missing


def project_requires() -> list[str]:
    """normtrain's requirements with their extras' markers: from the installed metadata, or, where the checkout
    runs uninstalled (a GPU machine that puts it on PYTHONPATH: scripts/gpu_check.py), from pyproject.toml."""
    try:
        return metadata.requires("normtrain") or []
    except metadata.PackageNotFoundError:
        import tomllib  # Python >= 3.11; an installed normtrain never gets here

        project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
        return [*project["dependencies"], *(f'{r}; extra == "{name}"' for name, reqs
                                            in project["optional-dependencies"].items() for r in reqs)]


def installed(requirement: Requirement) -> bool:
    try:
        return requirement.specifier.contains(metadata.version(requirement.name), prereleases=True)
    except metadata.PackageNotFoundError:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.extras("hf")``: README's test command installs only the dev extra, so without the extras
    named the test skips, saying which and how to install them. .ci/run then installs them and runs
    ``pytest -m extras`` with NORMTRAIN_REQUIRE_EXTRAS=1, under which a missing extra stops the session instead."""
    for item in items:
        missing = missing_extras([name for mark in item.iter_markers("extras") for name in mark.args])
        if not missing:
            continue
        quoted = " and ".join(repr(name) for name in missing)
        reason = (f"needs the {quoted} extra{'s' if len(missing) > 1 else ''}: "
                  f"pip install -e '.[{','.join(missing)}]'")
        if os.environ.get("NORMTRAIN_REQUIRE_EXTRAS") == "1":
            raise pytest.UsageError(f"NORMTRAIN_REQUIRE_EXTRAS=1, but {item.nodeid} {reason}")
        item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """pyproject's ``-n 2`` (xdist), except under ``-x``/``--maxfail`` or ``--pdb``: there one process, for xdist ends
    a run stopped at a failure with exit 2 (interrupted) instead of pytest's 1, which scripts/mutation_check.py reads
    as "a test failed", and it refuses --pdb. Runs before xdist's own hook (this one registers later)."""
    if getattr(config.option, "numprocesses", None) and (config.option.maxfail or config.option.usepdb):
        config.option.numprocesses = 0


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    close_all()  # the warm Python servers (tests/warm_python.py)


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory) -> Path:
    """Tokenized corpora are cached once per test session, in a temp folder."""
    cache = tmp_path_factory.mktemp("normtrain-cache")
    os.environ["NORMTRAIN_CACHE"] = str(cache)
    return cache


@pytest.fixture(scope="session")
def text_corpus(tmp_path_factory) -> Path:
    """A small folder of text files (about 60 KB) for fast end-to-end runs."""
    root = tmp_path_factory.mktemp("corpus")
    for i in range(40):
        lines = [f"def function_{i}_{j}(x):\n    return x * {j} + {i}  # line {j}\n" for j in range(40)]
        (root / f"file_{i:02d}.py").write_text("".join(lines))
    return root


@pytest.fixture
def tiny_base() -> list[str]:
    """Overrides that shrink the default model and run (the corpus stays the default)."""
    return list(TINY)


@pytest.fixture
def tiny(text_corpus) -> list[str]:
    """Overrides that shrink the default config to a run of a few seconds on the tiny corpus."""
    return [*TINY, "data=local_text", f"data.path={text_corpus}"]


def toy_encoding() -> dict:
    """A tiktoken encoding built in memory: the byte alphabet, two merges and an end-of-text token."""
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"re": 256, b"return": 257})
    return {"name": "toy", "pat_str": r"\w+|\s+|[^\w\s]+", "mergeable_ranks": ranks,
            "special_tokens": {"<|endoftext|>": 258}}


@pytest.fixture
def toy_tiktoken(monkeypatch):
    """``tiktoken:toy`` registered the way a tiktoken plugin registers an encoding (no files, no network); a test
    using it is marked ``extras("tiktoken")``."""
    from tiktoken import list_encoding_names, registry

    list_encoding_names()  # fills the registry
    monkeypatch.setitem(registry.ENCODING_CONSTRUCTORS, "toy", toy_encoding)
    monkeypatch.setattr(registry, "ENCODINGS", {})
