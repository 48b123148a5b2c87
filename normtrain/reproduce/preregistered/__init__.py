"""Each experiment's declaration (claim, paper's number, metric, norm, checks), one module per experiment.

These files are committed before the runs that test them; ``result.json`` records the commit they come from.
A check changed after results were seen stays here in its new form, and the change goes, with its reason, into
``experiments/NAME/CHECK_HISTORY.md``.
"""
