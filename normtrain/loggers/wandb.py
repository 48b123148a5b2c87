"""``logger=wandb``: a Weights & Biases run, online when wandb has a key for its host, else offline (in the run folder).

Every metric is plotted against ``step``; keys share prefixes (``grad_norm/``, ``act_std/``, ...), which W&B
turns into one panel section per prefix. Runs of one sweep share a group named by the sweep's date and
name, and each job's run name is unique and says what the job varied (normtrain/loggers/names.py).
"""

from __future__ import annotations

import netrc
import os
import shlex
import uuid
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from normtrain.loggers.base import LAYER_KEY, finite_numbers
from normtrain.util.atomic import write_text
from normtrain.util.events import event_row
from normtrain.util.runlog import say

DEFAULT_HOST = "https://api.wandb.ai"
CLOUD_HOSTS = ("wandb.ai", "forge.coreweave.com")  # W&B's cloud, under its two names
CLOUD_TEXT = "your W&B server (wandb.ai by default, or WANDB_BASE_URL)"


def wandb_mode(mode: str) -> tuple[str, str]:
    """(mode, why). ``auto``: online exactly when wandb itself would log in without asking (a key for the
    configured host: ``WANDB_API_KEY``, the netrc entry of ``WANDB_BASE_URL``'s or ``wandb login --host``'s
    host), else offline; nothing here reaches the network or prompts."""
    if mode != "auto":
        return mode, f"logger.mode={mode}"
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"], f"WANDB_MODE={os.environ['WANDB_MODE']}"
    host = wandb_host()
    try:
        source = key_source(host)
    except Exception as err:  # noqa: BLE001 - wandb rejects the key's format: a login would fail too
        return "offline", f"the API key for {server_text(host)} is not valid ({err})"
    if source:
        return "online", f"wandb has an API key for {server_text(host)} ({source})"
    login = "wandb login" if is_wandb_cloud(host) else f"wandb login --host {host}"
    return "offline", (f"no API key for {server_text(host)}: neither WANDB_API_KEY nor a netrc entry for its host; "
                       f"`{login}` logs the next runs online")


def is_wandb_cloud(host: str) -> bool:
    """Whether ``host`` is W&B's own cloud: api.wandb.ai, or the name newer wandb gives the same service
    (api.forge.coreweave.com, wandb 0.31's default), which a user who signed up at wandb.ai may not recognise."""
    return (urlsplit(host).hostname or "").removeprefix("api.") in CLOUD_HOSTS


def server_text(host: str) -> str:
    """The server as a user knows it: W&B's cloud by the name of its accounts, any other server by its URL."""
    return CLOUD_TEXT if is_wandb_cloud(host) else host


def sync_hint(folders: list[Path], host: str) -> str:
    """The command that uploads a run saved offline. A resumed run has one folder per process that wrote it, all
    with the run's id: ``wandb sync`` given them all uploads them into that one run, oldest first (wandb 0.31's
    ``wandb sync --help``: files of one run are synced in order of start time)."""
    command = "wandb sync " + " ".join(shlex.quote(str(f)) for f in folders)
    to = f"to {server_text(host)}"
    if len(folders) > 1:
        return (f"W&B run saved offline in {len(folders)} folders, one per process that wrote it (it was resumed); "
                f"upload them as one run {to} with: {command}")
    return f"W&B run saved offline; upload it {to} with: {command}"


def wandb_host() -> str:
    """The server wandb will talk to: ``WANDB_BASE_URL``, else its settings (``wandb login --host``), else W&B's."""
    if os.environ.get("WANDB_BASE_URL"):
        return os.environ["WANDB_BASE_URL"]
    try:
        from wandb.sdk import wandb_setup

        return str(wandb_setup.singleton().settings.base_url or DEFAULT_HOST)
    except Exception:  # noqa: BLE001 - another wandb version: its default host
        return DEFAULT_HOST


def key_source(host: str) -> str | None:
    """Where wandb finds a key for ``host`` (its own lookup where this wandb has it, never a prompt); None for none."""
    env = "WANDB_API_KEY" if os.environ.get("WANDB_API_KEY") else None
    try:
        from wandb.sdk.lib import wbauth
    except ImportError:  # a wandb without wbauth (< 0.22): the same lookup by hand
        return env or netrc_key(host)
    found = wbauth.authenticate_session(host=host, source="normtrain", prompt=False, update_session=False)
    return (env or "netrc or wandb settings") if found else None


def netrc_key(host: str) -> str | None:
    path = os.environ.get("NETRC") or Path.home() / ".netrc"
    try:
        return f"netrc {path}" if netrc.netrc(path).authenticators(urlsplit(host).netloc) else None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return None


class WandbLogger:
    """A W&B run; metrics keyed by ``step``, per-layer keys grouped into panels by their prefix."""

    def __init__(self, *, run_dir: Path, project: str, entity: str | None, group: str | None, name: str,
                 tags: list[str], job_type: str, mode: str, config: dict[str, Any]):
        import wandb

        self._wandb = wandb
        # One W&B run per run folder: a resumed run continues the same W&B run (its id, resume="allow"; "must"
        # would fail online where the first process logged offline and its folder is not synced yet). Offline,
        # wandb opens a folder per process, each marked resumable; `wandb sync` of them all makes the one run.
        id_file = Path(run_dir) / "wandb_run_id"
        run_id = id_file.read_text().strip() if id_file.is_file() else uuid.uuid4().hex[:12]
        write_text(id_file, run_id)
        kwargs = dict(project=project, entity=entity, group=group, name=name, tags=tags, job_type=job_type,
                      config=config, dir=str(run_dir), reinit="finish_previous", id=run_id, resume="allow",
                      settings=wandb.Settings(console="off", silent=True))
        mode, why = wandb_mode(mode)
        say(f"W&B {mode}: {why}")
        try:
            self.run = wandb.init(mode=mode, **kwargs)
        except Exception as err:  # a network or auth failure must not cost the run
            if mode != "online":
                raise
            warnings.warn(f"W&B online init failed ({err}); logging offline instead", stacklevel=2)
            self.run = wandb.init(mode="offline", **kwargs)
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")
        self.layers: dict[str, dict[int, list[tuple[int, float]]]] = {}  # for the by-layer charts at the end

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.run.log({"step": step, **metrics})
        for key, value in finite_numbers(metrics).items():
            if m := LAYER_KEY.match(key):
                self.layers.setdefault(m["prefix"], {}).setdefault(int(m["index"]), []).append((step, value))

    def rollback(self, record: dict[str, Any]) -> None:
        """The rollback as ``rollback/*`` values at its diverged step (the rows that follow restart at the restored
        step); the whole record goes to the run summary's ``rollbacks`` at the end."""
        self.run.log({"step": record["step"], **finite_numbers(event_row(record))})

    def layer_panels(self) -> dict[str, Any]:
        """One chart per per-layer family with a line per block (``<prefix>/by_layer``): W&B files each
        ``<prefix>/layer_i`` in its own panel, which hides how the blocks compare."""
        charts = {}
        for prefix, by_layer in self.layers.items():
            layers = sorted(by_layer)
            charts[f"{prefix}/by_layer"] = self._wandb.plot.line_series(
                xs=[[s for s, _ in by_layer[i]] for i in layers], ys=[[v for _, v in by_layer[i]] for i in layers],
                keys=[f"layer {i}" for i in layers], title=f"{prefix} by layer", xname="step")
        return charts

    def finish(self, summary: dict[str, Any]) -> None:
        keys = ("status", "steps", "diverged_at_step", "final_val_loss", "best_val_loss", "n_params", "alpha",
                "beta", "wall_time_s", "rollbacks", "restarts")
        self.run.summary.update({k: summary.get(k) for k in keys})
        if charts := self.layer_panels():
            self.run.log({"step": summary.get("steps") or 0, **charts})
        offline = self.run.settings.mode == "offline"
        wandb_dir = Path(self.run.dir).parent.parent  # <run_dir>/wandb/offline-run-<date>_<time>-<id>/files
        self.run.finish(exit_code=0 if summary.get("status") in ("completed", "diverged") else 1)
        if offline:  # a resumed run has one offline folder per process that wrote it: sync them all
            say(sync_hint(sorted(wandb_dir.glob(f"offline-run-*-{self.run.id}")), wandb_host()))


def ablation_summary(cfg, group: str, out: Path, decisions: dict[str, str], verdict_md: str) -> None:
    """One W&B run for a whole ablation (normtrain-ablate), in its runs' group: the decision per arm in its summary
    and verdict.md as a text panel; offline without a key, never a prompt."""
    import wandb

    mode, why = wandb_mode(cfg.logger.mode)
    say(f"W&B {mode}: {why}")
    run = wandb.init(project=cfg.logger.project, entity=cfg.logger.entity, group=group, name=f"{group} (decision)",
                     job_type="ablation", dir=str(out), mode=mode, reinit="finish_previous",
                     settings=wandb.Settings(console="off", silent=True))
    run.summary.update({f"decision/{arm}": text for arm, text in decisions.items()})
    run.log({"verdict": wandb.Html(f"<pre>{verdict_md}</pre>")})
    run.finish()
