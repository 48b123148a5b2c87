"""The one Markdown table writer: compact (write-ups, catalog) and padded (compare's table), pipes escaped."""

from normtrain.util.markdown import table


def test_compact_and_padded_layouts():
    rows = [["pre", "2.5"], ["post|x", "10.25"]]
    assert table(["run", "loss"], rows) == "| run | loss |\n|---|---|\n| pre | 2.5 |\n| post\\|x | 10.25 |"
    assert table(["run", "loss"], rows, numeric=[False, True]).splitlines() == [
        "| run     |  loss |",
        "|---------|------:|",
        "| pre     |   2.5 |",
        "| post\\|x | 10.25 |",
    ]
