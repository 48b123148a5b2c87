"""The catalog against the real config, both ways: every choice the config offers (each YAML of the norm, placement
and optim groups, each value of the catalog's keys) has an entry, and every entry selects a choice that exists
(it composes, validates and builds); README's table is the catalog's Markdown."""

from __future__ import annotations

import copy
from dataclasses import fields
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import normtrain
from normtrain.catalog import CHOICES, KINDS, markdown
from normtrain.catalog.render import replace_block
from normtrain.config import config_dir, validate
from normtrain.model.config import ATTN_GATES, QK_NORM_AT, QK_NORMS
from normtrain.model.init import INIT_SCHEMES
from normtrain.norms import GAINS

README = Path(__file__).resolve().parents[2] / "README.md"
TINY = ["model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.seq_len=16", "logger=none"]

# Keys of the typed groups that tune a choice rather than make one (sizes, rates, a placement's own options).
# A new key is either a choice (it gets an entry in normtrain/catalog/entries.py) or belongs here.
SETTINGS = {
    "model": {"n_layers", "d_model", "n_heads", "seq_len", "mlp", "d_ff", "pos", "bias", "emb_std", "vocab_size",
              "init_std"},  # init_std: σ of model.init=gpt2, olmo2
    "norm": {"name", "eps", "impl", "p", "alpha_init",
             "affine"},  # affine=false is the older spelling of norm.gain=none
    "placement": {"name", "alpha", "beta", "post_fraction", "head_scale", "post_act_norm", "resid_scale", "streams"},
    "optim": {"name", "lr", "betas", "eps", "weight_decay", "warmup_steps", "schedule", "min_lr_ratio",
              "decay_fraction", "warmup_overlaps", "grad_clip", "momentum", "qk_clip_alpha", "muon_lr", "muon_momentum",
              "muon_nesterov", "muon_ns_steps", "muon_weight_decay", "adjust_lr_fn"},
}
# Keys with a fixed set of values: each value other than the default needs its own entry.
ENUMS = {"model.qk_norm": QK_NORMS, "model.qk_norm_at": QK_NORM_AT, "model.attn_gate": ATTN_GATES, "norm.gain": GAINS,
         "model.init": tuple(INIT_SCHEMES)}
# Entries for choices that issue 26's later branches added (the test below checks them like the rest).
PENDING = {"placement=hybrid", "placement.first_pre=true", "placement=normformer", "placement=b2t",
           "placement=resi_dual", "placement=ngpt", "placement.gpas=true", "optim=muon", "optim.qk_clip=100",
           "model.emb_proj=true"}


def selected() -> dict[str, set[str]]:
    """{key: the values some entry selects}; a group choice ``norm=rmsnorm`` counts as key ``norm``."""
    out: dict[str, set[str]] = {}
    for c in CHOICES:
        key, _, value = c.select.partition("=")
        out.setdefault(key, set()).add(value)
    return out


def schema_defaults() -> dict[str, object]:
    cfg = normtrain.compose([])
    return {f"{group}.{k}": v for group in SETTINGS for k, v in cfg[group].items()}


def test_every_entry_is_complete():
    assert {c.kind for c in CHOICES} == set(KINDS)
    assert len({c.select for c in CHOICES}) == len(CHOICES), "two entries select the same override"
    for c in CHOICES:
        assert "=" in c.select and c.name and c.formula, c
        assert all(p.authors and 1950 <= p.year <= 2026 and (p.venue or p.arxiv or p.url) for p in c.papers), c
        assert all("/" in ref.repo for ref in c.code), c


@pytest.mark.parametrize("group", ["norm", "placement", "optim"])
def test_every_yaml_of_the_group_has_an_entry(group):
    offered = {p.stem for p in (Path(config_dir()) / group).glob("*.yaml")}
    assert offered, f"configs/{group}/ holds no YAML"
    missing = offered - selected().get(group, set())
    assert not missing, (f"configs/{group}/ offers {sorted(missing)} with no entry in normtrain/catalog/entries.py "
                         f"(add one per choice, then run: normtrain-catalog --update README.md)")


def test_every_value_of_the_catalog_keys_has_an_entry():
    defaults, chosen = schema_defaults(), selected()
    for key, values in ENUMS.items():
        missing = {v for v in values if v != defaults[key]} - chosen.get(key, set())
        assert not missing, f"{key}: {sorted(missing)} have no entry in normtrain/catalog/entries.py"


def test_every_key_of_the_typed_groups_is_a_catalogued_choice_or_a_setting():
    """A key added to model/norm/placement/optim (by any branch) must be catalogued or declared a setting."""
    from normtrain.config import GROUP_SCHEMAS

    chosen = selected()
    for group in SETTINGS:
        for field in fields(GROUP_SCHEMAS[group]):
            key = f"{group}.{field.name}"
            assert field.name in SETTINGS[group] or key in chosen, (
                f"{key} is neither a choice in normtrain/catalog/entries.py nor a setting listed in "
                f"SETTINGS ({__file__})")


def test_settings_name_real_keys_or_pending_ones():
    """SETTINGS must not hide a misspelt choice: each name is a schema field, or one a pending branch adds."""
    from normtrain.config import GROUP_SCHEMAS

    pending = {"head_scale", "post_act_norm", "resid_scale", "qk_clip_alpha", "muon_lr", "muon_momentum",
               "muon_nesterov", "muon_ns_steps", "muon_weight_decay", "adjust_lr_fn"}
    for group, names in SETTINGS.items():
        unknown = names - {f.name for f in fields(GROUP_SCHEMAS[group])} - pending
        assert not unknown, f"SETTINGS[{group!r}] names keys the schema lacks: {sorted(unknown)}"


def problems(choices) -> list[str]:
    """What goes wrong with each choice: a group choice (``norm=dyt``) needs its YAML (tests/test_config.py
    composes every one); the others (with what they need) must set schema keys to values that validate and build
    a tiny model. Hydra composes once per set of group choices (it is the slow part); the dotted keys are set on
    a copy, in struct mode, as Hydra would."""
    found, composed = [], {}
    for c in choices:
        overrides = [*c.needs, c.select]
        groups = tuple(o for o in overrides if "." not in o.partition("=")[0])
        try:
            for group, _, name in (o.partition("=") for o in groups):
                if not (Path(config_dir()) / group / f"{name}.yaml").is_file():
                    raise FileNotFoundError(f"configs/{group}/{name}.yaml does not exist")
            if len(groups) == len(overrides):
                continue
            if groups not in composed:
                composed[groups] = normtrain.compose([*TINY, *groups])
            cfg = copy.deepcopy(composed[groups])
            for key, _, value in (o.partition("=") for o in overrides if o not in groups):
                OmegaConf.update(cfg, key, value, merge=False)
            validate(cfg)
            normtrain.build_model(cfg)
        except Exception as err:  # noqa: BLE001 - every failure is a finding, reported together
            found.append(f"{c.select}: {type(err).__name__}: {' '.join(str(err).split())}")
    return found


def test_every_entry_selects_a_choice_that_exists():
    found = problems([c for c in CHOICES if c.select not in PENDING])
    assert not found, "entries that select nothing real:\n" + "\n".join(found)


def test_the_pending_entries_select_choices_that_exist():
    found = problems([c for c in CHOICES if c.select in PENDING])
    assert not found, "entries that select nothing real:\n" + "\n".join(found)


def test_readme_table_is_the_catalog():
    """README.md is what ``normtrain-catalog --update README.md`` would make of it (the markers must be there)."""
    readme = README.read_text(encoding="utf-8")
    assert replace_block(readme, markdown()) == readme, (
        "README.md's catalog table differs from normtrain-catalog --markdown; regenerate it: "
        "normtrain-catalog --update README.md")
