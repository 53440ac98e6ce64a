"""Help texts as a person reads them: each paragraph wraps where the terminal does, never mid-sentence."""

import re

from conftest import run_cli


def test_command_list_wraps_where_the_terminal_wraps():
    wide = run_cli("--help", env={"COLUMNS": "250"}, check=0).stdout
    # explain's and diff's first paragraphs span two source lines: on a wide terminal each is one line
    assert "works on a GPU and driver, or on every GPU class of a site, and why" in wide
    assert "bench figures that moved beyond noise" in wide


def test_no_help_text_breaks_a_sentence_before_the_panel_edge():
    narrow = run_cli("--help", env={"COLUMNS": "100"}, check=0).stdout
    rows = [line.strip("│ ").rstrip() for line in narrow.splitlines() if line.startswith("│")]
    # a wrapped line fills the panel; one far shorter that ends mid-sentence is a line break from the source
    short_mid_sentence = [r for r in rows if re.search(r"[a-z,]$", r) and len(r) < 60 and not re.match(r"^\w+\s{2,}", r)]
    assert short_mid_sentence == [], short_mid_sentence
    assert "seed" not in narrow.lower()  # no term a newcomer never met
