from normtrain.catalog.cli import main

main()
