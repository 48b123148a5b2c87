from normtrain.export.cli import main

main()
