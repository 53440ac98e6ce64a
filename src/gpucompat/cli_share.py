"""The command line's share commands: `export --bundle`, `import`, `key`, `trust`, and `report --site` (cli.py registers them).

Thin, as cli.py is: parse, call bundle.py or report/site.py, print. Apart from cli.py only so that it stays
one room; the errors are cli.guarded's (one sentence, exit 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from .errors import UserError

DB_HELP = "Database URL (default: sqlite under $XDG_DATA_HOME/gpucompat, or $GPUCOMPAT_DB)."
SOURCE_HELP = "Only the sweeps of one source: local (run here), imported (from any bundle), or a site's name."


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def chosen_sweep(store, sweep_id: int | None, source: str | None) -> int:
    """--sweep ID, else the newest sweep (of --source, if given); a sweep that is not of --source is refused."""
    if sweep_id is None:
        return store.latest_sweep_id(source)
    store.sweep(sweep_id)  # a clear error if there is no such sweep
    if source is not None and sweep_id not in {s["id"] for s in store.list_sweeps(source)}:
        raise UserError(f"sweep {sweep_id} is not from the source {source!r}; `gpucompat results --list` shows each sweep's source.")
    return sweep_id


def resumable(store, sweep_id: int) -> None:
    """sweep --resume: only a sweep run here; an imported one ran on another site's GPUs, and is read, never run, here."""
    source = store.sweep(sweep_id).get("source_id")  # a clear error if there is no such sweep
    if source is not None:
        site = next((s["source"] for s in store.list_sweeps("imported") if s["id"] == sweep_id), "another site")
        raise UserError(f"sweep {sweep_id} was imported from {site!r}: its cells ran on that site's GPUs, so it is read here, never resumed; "
                        "run a sweep of your own with its plan.")


def export(
    bundle: Path = typer.Option(..., "--bundle", help="The bundle to write: one gzip-compressed file (e.g. mysite-2026q4.gpucompat.gz)."),
    sweep_ids: Optional[List[int]] = typer.Option(None, "--sweep", help="A sweep to export; repeat it for more (default: every sweep run here)."),
    site: Optional[str] = typer.Option(None, "--site", help="This site's name in the bundle (default: $GPUCOMPAT_SITE, or site = \"...\" "
                                       "in ~/.config/gpucompat/config.toml)."),
    keep_hosts: bool = typer.Option(False, "--keep-hosts", help="Keep host and user names, paths and environment values (default: redacted)."),
    unsigned: bool = typer.Option(False, "--unsigned", help="Write it without a signature, on purpose (other sites import it only with "
                                  "--untrusted, marked unverified); by default it is signed with the key `gpucompat key` made."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Write sweeps into one file that travels, signed with this site's key: cells, verdicts, evidence, probe facts, bench figures and provenance."""
    from .bundle import export as write_bundle
    from .store import Store

    result = write_bundle(Store(db, readonly=True), bundle, sweep_ids, site, keep_hosts, unsigned)
    if json_out:
        _say(json.dumps(result, indent=2))
        return
    redacted = "host and user names, paths and environment values redacted" if result["redacted"] else "kept as they are (--keep-hosts)"
    signed = f"signed by the key {result['signed_by']}" if result["signed_by"] else "unsigned (--unsigned)"
    _say(f"wrote {result['path']}: {result['sweeps']} sweep(s), {result['cells']} cells from the site {result['site']!r} ({redacted}); "
         f"{result['bytes']:,} bytes, sha256 {result['sha256']}, {signed}")


def import_(
    bundle: Path = typer.Argument(..., help="A file written by `gpucompat export --bundle`."),
    untrusted: bool = typer.Option(False, "--untrusted", help="Import an unsigned bundle, or one signed by a key this site does not trust; "
                                   "every view marks its sweeps unverified (a signature that does not verify is refused all the same)."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Merge a bundle into the store, with its provenance, once its signature is checked against the keys this site trusts; a sweep already there is not added again."""
    from .bundle import merge, verify
    from .store import Store

    checked = verify(bundle, untrusted)  # the whole file, before the store is opened: a refused bundle leaves it untouched
    store = Store(db)
    result = merge(store, checked)
    if json_out:
        _say(json.dumps(result, indent=2))
        return
    origin = f"the site {result['site']!r} (gpucompat {result['gpucompat']}, exported {result['exported_at']}, {_signed(result)})"
    if not result["added"]:
        _say(f"nothing new: the {result['known']} sweep(s) of {bundle} from {origin} are already in {store.shown}")
        return
    ids = ", ".join(f"{a['id']} (was {a['was']} at {a['site']})" for a in result["added"])
    held = f"; {result['known']} already held" if result["known"] else ""
    _say(f"imported {len(result['added'])} sweep(s), {result['cells']} cells, from {origin} into {store.shown}: sweep {ids}{held}")


def _signed(result: dict) -> str:
    from .signing import OWN

    if result["verified"] and result["trusted_as"] == OWN:
        return f"signed with this site's own key {result['signer']}: verified"
    if result["verified"]:
        return f"signed with the key {result['signer']}, trusted as {result['trusted_as']!r}: verified"
    if result["signer"]:
        return f"signed with the key {result['signer']}, not trusted here: UNVERIFIED (--untrusted)"
    return "unsigned: UNVERIFIED (--untrusted)"


def key(
    new: bool = typer.Option(False, "--new", help="Make a new key even though the site has one (the old pair is kept aside under its "
                             "fingerprint; other sites must then trust the new public key)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """This site's signing key: made once (Ed25519, private 0600 under ~/.config/gpucompat), shown on every later run; give its public key file to the sites that import your bundles."""
    from .signing import site_key

    result = site_key(new)
    if json_out:
        _say(json.dumps(result, indent=2))
        return
    if result["retired"]:
        _say(f"the old key was set aside as {result['retired']}")
    _say(f"{'made a new' if result['created'] else 'this site has a'} signing key {result['fingerprint']}: private {result['private']} (0600, "
         f"keep it here); public {result['public']} (give it to other sites: `gpucompat trust add NAME site-key.pub`)")


def trust_add(
    name: str = typer.Argument(..., help="What to call the site whose key it is (a site name: letters, digits, spaces, ._@+-)."),
    keyfile: Path = typer.Argument(..., help="That site's public key file, as `gpucompat key` wrote it there (site-key.pub)."),
):
    """Trust another site's public key: bundles it signed import as verified."""
    from .signing import trust_add as add

    result = add(name, keyfile)
    _say(f"trusted {result['name']!r}, key {result['fingerprint']} (in {result['file']})")


def trust_list(json_out: bool = typer.Option(False, "--json", help="Print one JSON array.")):
    """The keys this site trusts, this site's own first."""
    from .signing import trusted

    keys = trusted()
    if json_out:
        _say(json.dumps(keys, indent=2))
        return
    if not keys:
        _say("no key is trusted yet: `gpucompat key` makes this site's own, `gpucompat trust add NAME KEYFILE` trusts another site's")
    for entry in keys:
        _say(f"{entry['fingerprint']}  {entry['name']}")


def trust_remove(name: str = typer.Argument(..., help="The name the key was trusted under (`gpucompat trust list`).")):
    """Trust a site's key no longer: its later bundles are refused (or, with --untrusted, marked unverified); sweeps imported before keep their mark."""
    from .signing import trust_remove as remove

    result = remove(name)
    _say(f"no longer trusted: {result['name']!r}, key {result['fingerprint']}")


def write_site(store, directory: Path, source: str | None) -> None:
    """report --site DIR: every page of the static site, from the newest results of the store (of one source, if given)."""
    from .bench import present
    from .report.site import write

    rows = store.result_rows(None, source)
    if not rows:
        raise UserError(f"no results {f'from the source {source!r} ' if source else ''}are stored in {store.shown}; nothing to publish.")
    cells = {r["cell_id"] for r in rows}
    figures = [present(r) for r in store.bench_rows(None) if r["cell"] in cells]
    result = write(directory, rows, figures, "GPU software compatibility", source)
    sys.stderr.write(f"wrote {result['pages']} pages under {result['directory']}: {result['stacks']} stacks on {result['gpu_classes']} "
                     f"GPU classes ({result['cells']} newest results) in {result['seconds']} s\n")


def register(app: typer.Typer, guarded) -> None:
    """Add the share commands to the command line (`guarded`: cli's one sentence and exit code for every error)."""
    app.command("export")(guarded(export))
    app.command("import")(guarded(import_))
    app.command("key")(guarded(key))
    trust_app = typer.Typer(help="The public keys of the sites whose bundles this site trusts.", no_args_is_help=True)
    trust_app.command("add")(guarded(trust_add))
    trust_app.command("list")(guarded(trust_list))
    trust_app.command("remove")(guarded(trust_remove))
    app.add_typer(trust_app, name="trust")
