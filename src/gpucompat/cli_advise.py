"""The command line's `advise` helpers: `advise --pool` (a site's classes) and `advise --format conda` (cli.py's
`advise` calls them). Apart from cli.py only so that it stays one room; the errors are cli.guarded's."""

from __future__ import annotations

import sys

from .cli_console import print_json
from .errors import UserError


def advise_conda(result: dict, python: str | None) -> None:
    """advise --format conda: the first stack advised (observed before predicted) as an environment.yml on stdout."""
    from .envs.conda import advised_environment

    items = result["observed"] + result["predicted"]
    if not items:
        raise UserError(f"nothing to advise, so no environment file: {result.get('empty') or 'see --explain.'}")
    item, t = items[0], result["target"]
    comment = (f"gpucompat advise: {result['framework']} {item['version']} [{item['variant']}] for {t['gpu'] or 'CC ' + t['cc']}, "
               f"driver {t['driver']} ({item['source']})\nconda-forge may not carry every PyPI release: solve it before use "
               "(a sweep with env = \"conda\" does).")
    sys.stdout.write(advised_environment(result["framework"], item["version"], item["variant"], python or item.get("python"),
                                         item.get("cuda_runtime"), comment))


def advise_pool(name: str | None, pool: str, gpu: str | None, cc: str | None, driver: str | None, python: str | None,
                db: str | None, json_out: bool, fmt: str, out) -> None:
    """advise --pool: the pool's classes as explain --pool reads them, then the store, then the answer."""
    from .answers.advise_pool import advise_pool as answer
    from .answers.asked import pool_targets, read_python
    from .answers.questions import framework_name
    from .report.rows import display_row
    from .store import Store

    if gpu or cc:
        raise UserError("--pool advises for the pool's own GPU classes: give it without --gpu or --cc.")
    if fmt != "table":
        raise UserError("--format conda writes one environment for one GPU: give it without --pool.")
    framework, _variant, notes = framework_name(name)
    python, python_from, python_notes = read_python(python, elsewhere=True)
    executor, targets, origin = pool_targets(pool)
    rows = [display_row(r) for r in Store(db, readonly=True).result_rows(None, framework=framework)]
    result = answer(framework, executor, targets, origin, driver, python, python_from, tuple(notes + python_notes), rows)
    if json_out:
        print_json(result)
        return
    from .report.answers import advise_pool_view

    for item in advise_pool_view(result):
        out.print(item, crop=False)
