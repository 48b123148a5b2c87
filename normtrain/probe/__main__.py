from normtrain.probe.cli import main

main()
