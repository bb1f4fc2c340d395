"""The README's example runs and prints what it says."""

import re
from pathlib import Path


def test_readme_example_runs(capsys):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[(15, 7), (45, 9)]"


def test_readme_rule_example_runs(capsys):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "parse_rule" in b)
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == re.search(r"# (\[\(70.*\])", block).group(1)


def test_readme_rule_builder_gives_the_parsed_rule():
    from specula.detectors.rules import Ev, P, gt, parse_rule, rule

    built = (rule("Fire", area="int", measuredTemp="double")
             .when("Smoke", area=P.a).each("Temp", within="5 min", area=P.a, value=gt(45))
             .where(area=Ev.Smoke.area, measuredTemp=Ev.Temp.value).build())
    assert built == parse_rule("""
        define Fire(area: int, measuredTemp: double)
        from   Smoke(area=$a) and each Temp(area=$a and value>45) within 5 min. from Smoke
        where  area=Smoke.area and measuredTemp=Temp.value""")


def test_readme_shedding_example_runs(capsys):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "Shedding(" in b)
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == re.search(r"# (True .*)$", block, re.M).group(1)
