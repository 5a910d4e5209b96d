from fedloom.cli import main

main()
