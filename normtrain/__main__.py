from normtrain.cli import main

main()
