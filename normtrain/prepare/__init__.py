"""``normtrain-prepare``: turn a source (local text, local parquet/json/arrow, a hub dataset) into token shards."""

from normtrain.prepare.pipeline import PrepareRequest, prepare

__all__ = ["PrepareRequest", "prepare"]
