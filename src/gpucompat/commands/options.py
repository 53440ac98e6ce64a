"""Options that several commands take, declared once, so that each reads and helps the same everywhere.

To give a command one of them: `db: Optional[str] = DbOption` in its parameters (Typer copies the declaration for
each command). An option whose help says something only one command means (explain's --db) adds to the same text.
"""

from __future__ import annotations

import typer

DB_HELP = "Database URL (default: sqlite under $XDG_DATA_HOME/gpucompat, or $GPUCOMPAT_DB)."
SITE_HELP = "This site's name in the bundle (default: $GPUCOMPAT_SITE, or site = \"...\" in ~/.config/gpucompat/config.toml)."
SOURCE_HELP = "Only the sweeps of one source: local (run here), imported (from any bundle), or a site's name."
PLAN_HELP = ("A plan: its name as `gpucompat results --list` shows it (the plan file's name = \"...\"), or the plan file itself. "
             "What a bare latest or latest~N means, and which sweep is shown by default: the newest of this plan.")
SWEEP_REF_HELP = "A sweep: its id, PLAN@latest or PLAN@latest~N (the Nth before that plan's newest), latest or latest~N (of --plan, else of the newest sweep's plan)."
WIDE_HELP = "Show every column of the tables, however wide (default: fit the terminal, dropping low-value columns first)."


def db_option(more: str = ""):
    """--db URL; `more`: a sentence that one command adds to the shared help."""
    return typer.Option(None, "--db", help=DB_HELP + more)


# the store: None is the default database (paths.default_url: $GPUCOMPAT_DB, else SQLite under $XDG_DATA_HOME)
DbOption = db_option()
# this site's name (bundle.site_name: --site, else $GPUCOMPAT_SITE, else the config file); `report --site DIR` is another option
SiteOption = typer.Option(None, "--site", help=SITE_HELP)
SourceOption = typer.Option(None, "--source", help=SOURCE_HELP)
# the driver's kernel module flavour, which decides which GPUs it drives (explain, advise, both with --pool)
KernelModuleOption = typer.Option(None, "--kernel-module", help="The driver's kernel module: open or proprietary (default: this machine's "
                                  "where the driver is; else a pool class's own; else assumed and said).")
WideOption = typer.Option(False, "--wide", help=WIDE_HELP)
# a plan's sweeps (sweep_refs.py): --plan NAME or --plan PLAN.toml; with --sweep, a reference (SWEEP_REF_HELP) instead of an id
PlanOption = typer.Option(None, "--plan", help=PLAN_HELP)
SweepRefOption = typer.Option(None, "--sweep", help=SWEEP_REF_HELP + " Default: the newest sweep.")
