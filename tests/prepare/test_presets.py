"""The public-corpus presets (data=fineweb_edu, ...): each names a normtrain-prepare command that its parser
accepts, says it when the shards are missing, and trains on them once they are there."""

import shlex
from pathlib import Path

import pytest

import normtrain
from normtrain.config import config_dir, validate
from normtrain.prepare.cli import parser
from normtrain.util.errors import ConfigError

PRESETS = sorted(p.stem for p in (Path(config_dir()) / "data").glob("*.yaml")
                 if "prepare:\n" in p.read_text() and p.stem != "tokens")


def test_every_public_corpus_has_a_preset():
    assert PRESETS == ["c4", "enwik8", "fineweb_edu", "openwebtext", "tinystories", "wikitext"]


@pytest.mark.parametrize("preset", PRESETS)
def test_a_missing_preset_says_the_command_that_prepares_it(preset, tmp_path, monkeypatch):
    monkeypatch.setenv("NORMTRAIN_DATA", str(tmp_path))
    cfg = normtrain.compose([f"data={preset}", "logger=none"])
    assert cfg.data.name == "tokens" and cfg.data.path == f"{tmp_path}/{preset}"
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    (problem,) = err.value.problems
    command = problem.split(" with: ")[1]
    args = parser().parse_args(shlex.split(command)[1:])  # the command is one the CLI accepts...
    p = cfg.data.prepare
    assert (args.source, args.out_dir, args.tokenizer) == (p.source, cfg.data.path, p.tokenizer)  # ...as written
    assert (args.config, args.revision, args.streaming, args.max_tokens, args.val_fraction, args.vocab_size) == (
        p.config, p.revision, p.streaming, p.max_tokens, cfg.data.val_fraction, p.vocab_size)
    yaml = (Path(config_dir()) / "data" / f"{preset}.yaml").read_text()
    documented = " ".join(line.strip("# \\\n") for line in yaml.splitlines() if "normtrain-prepare" in line
                          or line.startswith("#       --"))
    assert sorted(shlex.split(documented.replace(f"data/{preset}", cfg.data.path))) == sorted(shlex.split(command))


@pytest.mark.slow
def test_a_prepared_preset_trains(shard_dirs, tiny_base, tmp_path, monkeypatch):
    monkeypatch.setenv("NORMTRAIN_DATA", str(shard_dirs["bytes"].parent))
    (shard_dirs["bytes"].parent / "enwik8").symlink_to(shard_dirs["bytes"])
    summary = normtrain.train(normtrain.compose([*tiny_base, "data=enwik8", "train.max_steps=3"]), run_dir=tmp_path)
    assert summary["status"] == "completed" and summary["corpus"]["name"] == "tokens"
