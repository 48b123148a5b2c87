"""Leaf helpers: each imports nothing else of normtrain, so every layer may use them.

  atomic.py      the one atomic writer (temp file beside the target, renamed over it) every writer uses
  hashing.py     the one block reader behind the corpus fingerprint, the shards' sha256 and checkpoint CRCs
  numbers.py     the one number format of every table cell, write-up and report; markdown.py: the one table writer
  spread.py      the one mean ± sample sd (n) over seeds: tables, write-ups and the report's bands
  pngs.py        every PNG file written
  dotted.py      nested configs as flat {"model.n_layers": 6} dicts
  errors.py      errors whose message is meant for the user (exit 2), not a traceback
  provenance.py  which commit produced a result; version.py: the package version
  runlog.py      lines said on stderr and kept in cli.log; progress.py: the bar or plain lines
  events.py      the metrics row of an event (a rollback), which the loop writes and every logger knows
  optimizers.py  Muon's settings and the torch optimizers one optimizer is made of (config checks, checkpoints)
  ranks.py       torchrun's world size, the strategies, a rank's shard of a DTensor (config checks, checkpoints)
  moved.py       the modules' old names (normtrain.training, normtrain.atomic, ...), kept importable
"""
