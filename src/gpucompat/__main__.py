"""The console entry point. `gpucompat check FRAMEWORK --env current` starts its probe here, before the CLI
and its libraries are imported, so the framework's import overlaps gpucompat's own start (executors/early.py)."""

import sys


def main() -> None:
    if sys.argv[1:2] == ["check"]:  # imported for `check` alone: the other commands start as fast as before
        from .executors.early import start_for_argv

        start_for_argv(sys.argv[1:])
    from .cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
