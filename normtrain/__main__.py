from normtrain.cli import run

run()
