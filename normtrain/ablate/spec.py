"""What an ablation asks, read from the command line and checked before anything trains: the arms, the shared
overrides, the tuned key and its grid, the seeds, the baseline and the decision's numbers.

``normtrain-ablate placement=pre,peri model.n_layers=24 --seeds 5``: the one override whose value is a comma
list names the arms (``placement=pre`` and ``placement=peri``); every other override is shared by all of them.
Every problem is collected and reported together (exit 2), with what is allowed; nothing trains before the spec
is whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from normtrain.study.branches import half_of
from normtrain.study.decision import ALPHA, MARGIN, Protocol
from normtrain.study.question import MAX_EXTENSIONS
from normtrain.study.question import Question as Spec
from normtrain.util.errors import ConfigError, StudyError

TUNE = "optim.lr"
GRID_POINTS, GRID_FACTOR = 3, 2.0  # the default grid: the config's value ÷ 2, itself, × 2
SEEDS = 5


@dataclass
class Asked:
    """The command line's ablation options, before they are checked (``parse`` makes a ``Spec`` of them)."""

    overrides: list[str]
    tune: str = TUNE
    grid: str | None = None
    seeds: int = SEEDS
    baseline: str | None = None
    margin: float = MARGIN
    alpha: float = ALPHA
    max_extensions: int = MAX_EXTENSIONS
    problems: list[str] = field(default_factory=list)


def split_arms(overrides: list[str]) -> tuple[str | None, list[str], list[str], list[str]]:
    """(arm key, arm values, shared overrides, problems): the override with a comma list outside brackets is the
    arm axis."""
    arm_key, arms, shared, problems = None, [], [], []
    for o in overrides:
        key, eq, value = o.partition("=")
        if not eq:
            problems.append(f"{o!r} is not an override KEY=VALUE")
            continue
        if _is_list(value):
            if arm_key is not None:
                problems.append(f"two overrides list values ({arm_key}=… and {key}=…): an ablation compares the arms "
                                "of one key; run one ablation per key, or set the other on its own")
                continue
            arm_key, arms = key.lstrip("+"), [v.strip() for v in _top_level_split(value)]
        else:
            shared.append(o)
    if arm_key is not None and (twice := [o for o in shared if o.partition("=")[0].lstrip("+") == arm_key]):
        problems.append(f"{arm_key} is the arm key and also a shared override ({', '.join(twice)}): give it once, "
                        "with the arms' values")
    if arm_key is None:
        problems.append("no arms: give the key that differs between the arms with a comma list, e.g. "
                        "placement=pre,peri")
    elif len(arms) < 2 or len(set(arms)) != len(arms):
        problems.append(f"{arm_key}={','.join(arms)}: an ablation needs at least two different values")
    return arm_key, arms, shared, problems


def _is_list(value: str) -> bool:
    return len(_top_level_split(value)) > 1


def _top_level_split(value: str) -> list[str]:
    """``a,b`` → [a, b]; a comma inside brackets or quotes (``[1,2]``) does not split."""
    parts, depth, quote, current = [], 0, None, ""
    for ch in value:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += ch
    parts.append(current)
    return parts


def parse_grid(text: str | None, current: float | None, problems: list[str]) -> tuple[float, ...]:
    """``--grid V1,V2,...`` (at least 3 positive numbers), or the default log grid around the config's value."""
    if text is None:
        if current is None or not current > 0:
            problems.append("the tuned key has no positive value in the config to build a grid around: give --grid")
            return ()
        return tuple(current * GRID_FACTOR ** (i - GRID_POINTS // 2) for i in range(GRID_POINTS))
    try:
        values = tuple(sorted({float(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        problems.append(f"--grid {text}: not a list of numbers (e.g. --grid 5e-4,1e-3,2e-3)")
        return ()
    if len(values) < 3:
        problems.append(f"--grid {text}: a best value needs points on both sides of it: give at least 3 values "
                        f"(got {len(values)})")
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        problems.append(f"--grid {text}: the values must be positive (the grid is logarithmic)")
    return values


def check_numbers(asked: Asked, problems: list[str]) -> None:
    if asked.seeds < 1:
        problems.append(f"--seeds {asked.seeds}: give at least 1 (2 for an interval; 5 or more to decide on "
                        "small effects)")
    if asked.max_extensions < 0:
        problems.append(f"--max-extensions {asked.max_extensions}: give 0 or more")
    try:
        Protocol(margin=asked.margin, alpha=asked.alpha)
    except ValueError as err:
        problems.append(f"--margin/--alpha: {err}")


def raise_problems(problems: list[str]) -> None:
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise StudyError(f"the ablation cannot run as asked; nothing was trained:\n{lines}")


def parse(asked: Asked) -> Spec:
    """Check everything the command line asks (every problem at once: ``ConfigError``, exit 2) and resolve it."""
    from omegaconf import OmegaConf

    problems = list(asked.problems)
    arm_key, arms, shared, found = split_arms(asked.overrides)
    problems += found
    check_numbers(asked, problems)
    baseline = asked.baseline if asked.baseline is not None else (arms[0] if arms else None)
    if arms and baseline not in arms:
        problems.append(f"--baseline {baseline}: not an arm; the arms are {', '.join(arms)}")
    configs = composed(arm_key, arms, shared, problems) if arm_key else {}
    cfg = configs.get(baseline) or next(iter(configs.values()), None)  # the grid is checked even so
    grid: tuple[float, ...] = ()
    if cfg is not None:
        current = OmegaConf.select(cfg, asked.tune, default=None)
        if current is None or isinstance(current, bool) or not isinstance(current, (int, float)):
            problems.append(f"--tune {asked.tune}: not a numeric key of the config (the tuned key is a number, "
                            f"e.g. optim.lr, optim.warmup_steps)")
        else:
            grid = parse_grid(asked.grid, float(current), problems)
        if asked.tune == arm_key:
            problems.append(f"--tune {asked.tune} is the arm key itself: tune another key")
    raise_problems(problems)
    t, o = cfg.train, cfg.optim
    branch = o.schedule == "wsd"
    half, branch_step = half_of(int(t.max_steps), int(o.warmup_steps), float(o.decay_fraction), branch)
    if half < 1 or (branch and branch_step >= half):
        raise_problems([f"train.max_steps={t.max_steps}: too short for a comparison at half the steps (with "
                        f"optim.warmup_steps={o.warmup_steps}, the T/2 run must decay after its warm-up)"])
    return Spec(arm_key=arm_key, arms=tuple(arms), baseline=baseline, shared=tuple(shared), tune=asked.tune,
                grid=grid, seeds=tuple(range(asked.seeds)), steps=int(t.max_steps), half_steps=half, branch=branch,
                branch_step=branch_step, margin=asked.margin, alpha=asked.alpha,
                max_extensions=asked.max_extensions, select_windows=select_windows_for(cfg))


def composed(arm_key: str, arms: list[str], shared: list[str], problems: list[str]) -> dict[str, Any]:
    """Each arm's config, composed and validated; every misspelt key and unknown option named at once (with the
    config's own "did you mean"), nothing composed past them."""
    from normtrain.config import compose, validate
    from normtrain.config.compose import group_options
    from normtrain.config.names import composition_problem, override_problems

    wrong = override_problems([*shared, f"{arm_key}={','.join(arms)}"], group_options())
    if wrong:
        problems += wrong
        return {}
    configs = {}
    for arm in arms:
        try:
            configs[arm] = compose([*shared, f"{arm_key}={arm}"])
            validate(configs[arm])
        except ConfigError as err:
            problems += [f"{arm_key}={arm}: {p}" for p in err.problems]
        except Exception as err:  # noqa: BLE001 - Hydra's and OmegaConf's own errors: say them, never a traceback
            problems.append(f"{arm_key}={arm}: {composition_problem(err) or err}")
    return configs


def select_windows_for(cfg) -> int:
    """As many held-out selection windows as judged ones, less one: one between each two judged windows."""
    from normtrain.config import global_batch
    from normtrain.data import eval_window_count

    t = cfg.train
    return max(1, eval_window_count(t.eval_windows, global_batch(t, 1), t.eval_batches, 1) - 1)
