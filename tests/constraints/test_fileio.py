"""The constraint file (JSON Lines): every bad line is refused, naming the line."""

from __future__ import annotations

import pytest

from hierdp.constraints import ConstraintError, Constraints

GOOD = """{"format": "hierdp.constraints", "version": 1}
# a comment, then a blank line

{"kind": "linear", "name": "cap", "terms": {"IL/COOK": 1, "IN/LAKE": 1}, "upper": 5850000}
{"kind": "linear", "name": "mixed", "terms": [[["IL", "COOK"], 2], [{"state": "IN", "county": "LAKE"}, -1]], "lower": 0}
{"kind": "bounds", "name": "lake", "node": "IL/LAKE", "lower": 500000, "upper": 9e5}
{"kind": "zero", "node": ["WI", "MENOMINEE"]}
{"kind": "invariant", "name": "il", "node": "IL", "value": 11430602}
{"kind": "cell_rule", "name": "gq", "terms": {"gq_persons": 1, "gq_facilities": -1}, "lower": 0, "levels": ["block"]}
"""


def test_a_good_file_reads_every_kind(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(GOOD, encoding="utf-8")
    c = Constraints.read(path)
    assert [e.kind for e in c] == ["linear", "linear", "bounds", "zero", "invariant", "cell_rule"]
    assert c["cap"].where == "line 4"
    assert c["lake"].upper == 900_000 and isinstance(c["lake"].upper, int)
    assert c["line 7"].node == ("WI", "MENOMINEE")  # an unnamed entry is named after its line
    mixed = dict(c["mixed"].terms)
    assert mixed[("IL", "COOK")] == 2 and len(mixed) == 2


@pytest.mark.parametrize("line, match", [
    ('{"kind": "linear", "terms": {"a": 1}, "upper": NaN}', "line 2: NaN is not allowed"),
    ('{"kind": "linear", "terms": {"a": 1}, "upper": Infinity}', "line 2: Infinity is not allowed"),
    ('{"kind": "linear", "terms": {"a": 1}, "upper": 1, "upper": 2}', "line 2: key 'upper' appears twice"),
    ('{"kind": "linear", "terms": {"a": 1} "upper": 1}', r"line 2, column \d+: not valid JSON"),
    ('{"kind": "linear", "terms": {"a": 1}, "uper": 1}', "linear 'line 2' \\(line 2\\): unknown key 'uper'"),
    ('{"kind": "row", "terms": {"a": 1}, "upper": 1}', "entry \\(line 2\\): unknown kind 'row'"),
    ('{"kind": "bounds", "upper": 1}', "missing 'node'"),
    ('{"kind": "linear", "terms": {"a": 1}}', "line 2.*give a lower or an upper bound"),
    ('{"kind": "linear", "terms": {"a": "1"}, "upper": 1}', "line 2.*must be a number"),
    ('{"kind": "linear", "terms": {"a": 1}, "lower": 3, "upper": 1}', "line 2.*lower bound 3 > upper bound 1"),
    ('{"kind": "invariant", "node": "a", "value": null}', "line 2.*must be a number"),
    ('[1, 2]', "entry \\(line 2\\): expected a JSON object"),
    ('{"kind": "linear", "name": 5, "terms": {"a": 1}, "upper": 1}', "line 2.*name must be a non-empty string"),
    ('{"kind": "cell_rule", "terms": {"a": 1}, "upper": 1}', "line 2.*either levels or nodes"),
])
def test_bad_lines_are_named(tmp_path, line, match):
    path = tmp_path / "c.jsonl"
    path.write_text('{"kind": "bounds", "name": "ok", "node": "a", "upper": 3}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(ConstraintError, match=match):
        Constraints.read(path)


def test_duplicate_names_name_both_lines(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"kind": "bounds", "name": "x", "node": "a", "upper": 3}\n\n'
                    '{"kind": "bounds", "name": "x", "node": "b", "upper": 3}\n', encoding="utf-8")
    with pytest.raises(ConstraintError, match="duplicate name 'x' \\(line 3\\): first used at line 1"):
        Constraints.read(path)


@pytest.mark.parametrize("header, match", [
    ('{"format": "other", "version": 1}', "format 'other' is not 'hierdp.constraints'"),
    ('{"format": "hierdp.constraints", "version": 2}', "version 2 is not supported"),
    ('{"format": "hierdp.constraints", "version": 1, "x": 1}', "unknown key 'x' in the header"),
])
def test_the_header_is_checked(tmp_path, header, match):
    path = tmp_path / "c.jsonl"
    path.write_text(header + "\n", encoding="utf-8")
    with pytest.raises(ConstraintError, match=f"line 1: {match}"):
        Constraints.read(path)


def test_unreadable_files(tmp_path):
    with pytest.raises(ConstraintError, match="not found"):
        Constraints.read(tmp_path / "missing.jsonl")
    with pytest.raises(ConstraintError, match="is a directory"):
        Constraints.read(tmp_path)
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"kind": "bounds", "node": "M\xfcnchen", "upper": 3}\n')
    with pytest.raises(ConstraintError, match="not UTF-8"):
        Constraints.read(bad)


def test_an_empty_file_is_an_empty_set(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text("# nothing yet\n", encoding="utf-8")
    assert len(Constraints.read(path)) == 0


def test_written_files_have_a_header_and_one_entry_per_line(tmp_path):
    c = Constraints().add_linear({"a": 1, ("b", "c"): 2}, upper=4, name="r").add_zero({"state": "WI"}, name="z")
    text = c.write(tmp_path / "c.jsonl").read_text(encoding="utf-8").splitlines()
    assert text[0] == '{"format": "hierdp.constraints", "version": 1}'
    assert text[1] == '{"kind": "linear", "name": "r", "terms": [["a", 1], [["b", "c"], 2]], "upper": 4}'
    assert text[2] == '{"kind": "zero", "name": "z", "node": {"state": "WI"}}'
