"""The protocol engine: how normtrain decides "is X better than Y?", for a user's ablation and a reproduction alike.

Experiments (normtrain/reproduce/) and ``normtrain-ablate`` both stand on these modules:

  plan, grid ........ the runs of a study expanded, trained ``--jobs`` at a time, a finished run reused
  rows .............. a trained run as one row of the study's table
  best_lr ........... each arm at its own best learning rate, by a rule fixed before the runs
  stats, significance  seeds, paired differences, intervals named for what they are, tests and their error rates
  preregistration ... the declared claim and checks; verdicts: the checks applied, the verdict reached
  plots ............. every seed drawn, the unigram line, readable log axes
"""
