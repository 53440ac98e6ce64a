"""The command line, one module per verb (`commands/<verb>.py`), each with `register(app)`; cli.py builds the app and
registers them. Shared here: `common.py` (errors as one sentence, the consoles), `options.py` (options several commands
take, declared once), `printing.py` (a stored sweep's results and bench figures as several commands print them).

Each module is as thin as a command line should be: parse, call one function below, print. Everything below is
imported inside the command's function, so that `gpucompat --version` and `explain` start fast (docs/performance.md).
"""
