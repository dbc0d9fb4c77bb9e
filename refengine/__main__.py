from refengine.cli import main

main()
