"""One module per instructor's command (cli.py parses the command line and calls each): what the command does, end to end."""
