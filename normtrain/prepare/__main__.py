from normtrain.prepare.cli import main

main()
