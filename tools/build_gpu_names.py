"""Build src/gpucompat/knowledge/data/pci_gpus.csv: every NVIDIA GPU name in the PCI ID
database, with the compute capability of its chip.

pci.ids names each NVIDIA (vendor 10de) device with its chip, e.g.
    2484  GA104 [GeForce RTX 3070]
    249d  GA104M [GeForce RTX 3070 Mobile / Max-Q]
The chip code (less its M/GL/GLM/B/BM/BGL... suffix) resolves through
tools/facts/gpu_chips.csv (chip,architecture,cc,source; each row sourced) to a CC. Each name
is written once per spelling ("Mobile / Max-Q" gives "... Mobile" and "... Max-Q"), with a
source naming the pci.ids version, the device id(s) and the chip row.

Devices whose chip is not in gpu_chips.csv (pre-Fermi chips, chipsets, Rubin, chips NVIDIA
has published no CC for) are skipped and counted; names that two devices of different CC
share are dropped and counted.

The committed CSV is what gpucompat reads at run time (CI has no network and no pci.ids).
To rebuild it:

    # a current pci.ids: the PCI ID project's snapshot repository (github.com/pciutils/pciids),
    # or Debian's `pci.ids` package (apt-get download pci.ids; dpkg -x *.deb x; x/usr/share/misc/pci.ids)
    curl -LO https://raw.githubusercontent.com/pciutils/pciids/master/pci.ids
    python tools/build_gpu_names.py pci.ids            # writes the CSV, prints counts
    PYTHONPATH=src python -m pytest tests/test_gpu_names.py -q
"""

from __future__ import annotations

import argparse
import csv
import itertools
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHIPS = ROOT / "tools" / "facts" / "gpu_chips.csv"
OUT = ROOT / "src" / "gpucompat" / "knowledge" / "data" / "pci_gpus.csv"

VENDOR = "10de"
_VENDOR_LINE = re.compile(r"^([0-9a-f]{4})\s+(.*)$")
_DEVICE_LINE = re.compile(r"^\t([0-9a-f]{4})\s+(.*)$")
_DEVICE_TEXT = re.compile(r"^(?P<chip>[^\[\]]*?)\s*\[(?P<name>[^\[\]]+)\]\s*$")
# A GPU chip code as pci.ids writes it: GA104, GA104M, GK110BGL, TU117GLM, GB20B, NV43, G92, GT200b...
_CHIP_CODE = re.compile(r"^(?:NV\w+|G\d+\w*|GT\d+\w*|G[A-Z]\d+\w*|TU\d+\w*|AD\d+\w*|C\d+\w*|MCP\w+)$")
# Bracketed names that are not products a driver would report.
_NOT_A_PRODUCT = re.compile(r"NVSwitch|Audio|USB|UCSI|Reserved|Initial DevID|Engineering Sample|"
                            r"Desktop Device|FPGA|Generic|\bES\b|-ES-|\bINT\b|SKU\b|^PG\d", re.IGNORECASE)
_TIER_WORDS = {"gt", "gtx", "gts", "rtx", "mx", "nvs"}


def read_version(text: str) -> str:
    match = re.search(r"^#\s*Version:\s*(\S+)", text, re.MULTILINE)
    return match.group(1) if match else "unknown"


def nvidia_devices(text: str):
    """(device id, chip text, bracketed name) for each NVIDIA device line that has a name."""
    in_vendor = False
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        vendor = _VENDOR_LINE.match(line)
        if vendor:
            in_vendor = vendor.group(1) == VENDOR
            continue
        if line.startswith("C "):  # the device-class section at the end
            in_vendor = False
            continue
        if not in_vendor:
            continue
        device = _DEVICE_LINE.match(line)
        if device:  # (subsystem lines start with two tabs and do not match)
            yield device.group(1), device.group(2)


def split_device(text: str) -> tuple[str, str | None] | None:
    """'GA104M [GeForce RTX 3070 Mobile / Max-Q]' -> ('GA104M', 'GeForce RTX ...'); 'GB203M / GN22 [..]'
    -> ('GB203M', ..); 'GB100' -> ('GB100', None). None for a line that is not a GPU chip
    ('GA102 High Definition Audio Controller', 'MCP79 SATA Controller')."""
    match = _DEVICE_TEXT.match(text)
    chip_text, name = (match.group("chip"), match.group("name")) if match else (text, None)
    chip = chip_text.split(" / ")[0].strip()
    if not _CHIP_CODE.match(chip):
        return None
    return chip, name


def chip_row(code: str, chips: dict[str, dict]) -> dict | None:
    """The chip table row for a pci.ids chip code: its longest prefix in the table
    (GK110BGL -> GK110B, GA104GLM -> GA104, TU104BM -> TU104, GB10B -> GB10B)."""
    for end in range(len(code), 3, -1):
        row = chips.get(code[:end])
        if row:
            return row
    return None


def _shared_prefix(a: str, b: str) -> int:
    return len(list(itertools.takewhile(lambda pair: pair[0] == pair[1], zip(a.lower(), b.lower()))))


def _alternative(first: list[str], alt: list[str]) -> list[list[str]]:
    """The full names that an alternative after ' / ' stands for, given the first name."""
    head = alt[0]
    lowered = [w.lower() for w in first]
    if head.lower() in lowered:  # 'Quadro K620M / Quadro M500M'
        return [first[:lowered.index(head.lower())] + alt]
    if any(c.isdigit() for c in head):  # a model word: 'Tesla C2050 / C2070', 'GTX 960 OEM / 970M'
        scored = [(_shared_prefix(w, head), i) for i, w in enumerate(first) if any(c.isdigit() for c in w)]
        if not scored:
            return [alt]
        best = max(scored)[0]
        i = max(i for score, i in scored if score == best) if best else max(i for _, i in scored)
        names = [first[:i] + alt]
        if i == len(first) - 1 and len(alt) > 1:  # 'RTX 2000 / 2000E Ada Generation': the tail is shared
            names.append(first + alt[1:])
        return names
    if head.lower() in _TIER_WORDS:  # 'GeForce 610M/710M / GT 620M'
        i = next((i for i, w in enumerate(first) if any(c.isdigit() for c in w)), len(first))
        return [first[:i] + alt]
    model = next((i for i, w in enumerate(first) if any(c.isdigit() for c in w)), None)
    modifiers = [i for i, w in enumerate(first) if model is not None and i > model and not any(c.isdigit() for c in w)]
    if modifiers:  # 'GeForce RTX 3070 Mobile / Max-Q'
        i = modifiers[-1]
        names = [first[:i] + alt]
        if i == len(first) - 1 and len(alt) > 1:
            names.append(first + alt[1:])
        return names
    return [alt]  # 'Tesla T10 16GB / GRID RTX T10-2': a name of its own


def _expand_words(words: list[str]) -> list[str]:
    """'Quadro RTX 6000/8000' -> 'Quadro RTX 6000', 'Quadro RTX 8000'."""
    options = [w.split("/") if "/" in w and all(w.split("/")) else [w] for w in words]
    return [" ".join(choice) for choice in itertools.islice(itertools.product(*options), 32)]


def expand(name: str) -> list[str]:
    """Every spelling a bracketed pci.ids name stands for, first the name as written."""
    parts = [p.split() for p in name.split(" / ") if p.strip()]
    if not parts:
        return []
    names = [parts[0]]
    for alt in parts[1:]:
        names.extend(_alternative(parts[0], alt))
    out: list[str] = []
    for words in names:
        for spelled in _expand_words(words):
            if spelled not in out:
                out.append(spelled)
    return out


def load_chips(path: Path = CHIPS) -> dict[str, dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return {row["chip"]: row for row in csv.DictReader(handle)}


def build(text: str, chips: dict[str, dict]) -> tuple[list[dict], dict]:
    """(rows for pci_gpus.csv, counts)."""
    version = read_version(text)
    skipped_chips: Counter = Counter()
    unnamed = not_products = 0
    found: dict[str, dict] = {}  # name -> {name, chip, cc, architecture, ids}
    seen_cc: dict[str, set] = defaultdict(set)
    for device_id, device_text in nvidia_devices(text):
        parsed = split_device(device_text)
        if parsed is None:
            continue  # audio, USB, bridges, chipset functions: not a GPU
        code, name = parsed
        row = chip_row(code, chips)
        if row is None:
            skipped_chips[code] += 1
            continue
        if not name:
            unnamed += 1
            continue
        if _NOT_A_PRODUCT.search(name) or chip_row(name.split()[0].split("-")[0], chips):
            not_products += 1  # 'Reserved Dev ID A', 'GK208-100', 'GM107 CS1'
            continue
        for spelled in expand(name):
            seen_cc[spelled].add(row["cc"])
            entry = found.setdefault(spelled, {"name": spelled, "chip": row["chip"], "cc": row["cc"],
                                               "architecture": row["architecture"], "ids": []})
            entry["ids"].append(device_id)
    conflicts = sorted(n for n, ccs in seen_cc.items() if len(ccs) > 1)
    rows = []
    for spelled in sorted(found, key=str.lower):
        if spelled in conflicts:
            continue
        entry = found[spelled]
        ids = " ".join(f"{VENDOR}:{i}" for i in entry["ids"][:3]) + (" ..." if len(entry["ids"]) > 3 else "")
        rows.append({"name": spelled, "chip": entry["chip"], "cc": entry["cc"], "architecture": entry["architecture"],
                     "source": f"pci.ids {version} {ids}; chip {entry['chip']} (tools/facts/gpu_chips.csv)"})
    counts = {"version": version, "rows": len(rows), "skipped_unknown_chip": sum(skipped_chips.values()),
              "skipped_by_chip": dict(sorted(skipped_chips.items())), "unnamed": unnamed,
              "not_products": not_products, "conflicting_names": conflicts}
    return rows, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pci_ids", type=Path, help="a pci.ids file")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--chips", type=Path, default=CHIPS)
    args = parser.parse_args(argv)
    rows, counts = build(args.pci_ids.read_text(encoding="utf-8", errors="replace"), load_chips(args.chips))
    with args.out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["name", "chip", "cc", "architecture", "source"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"pci.ids {counts['version']}: wrote {counts['rows']} names to {args.out}")
    print(f"skipped {counts['skipped_unknown_chip']} GPU devices whose chip is not in {args.chips.name}:")
    print("  " + ", ".join(f"{chip} {n}" for chip, n in counts["skipped_by_chip"].items()))
    print(f"skipped {counts['unnamed']} devices with no name, {counts['not_products']} names that are not products")
    print(f"dropped {len(counts['conflicting_names'])} names shared by chips of different CC: {counts['conflicting_names']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
