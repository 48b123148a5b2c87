"""README's first screen: what normtrain is, the Quickstart's two commands (the test one exactly what .ci/run runs),
and the three things users come for (sweep and compare, ablate, reproduce), each with one command and a link to
its section; the install section says what each torch build costs and how to get the CPU one; every link to a
section of the page lands on a heading."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = "\n".join(README.splitlines()[:60])
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def ci_test_command() -> str:
    """The test command .ci/run runs (and checks README for, word for word)."""
    (command,) = re.findall(r"^readme_test='(.+)'$", (ROOT / ".ci" / "run").read_text(), flags=re.M)
    return command


def quickstart_commands() -> list[str]:
    """The command lines of the Quickstart's code block."""
    section = README.split("## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def anchors(text: str) -> set[str]:
    """GitHub's anchors of the page's headings: lower case, punctuation but - and _ dropped, spaces to -, and a
    repeated one numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"```.*?```", "", text, flags=re.S), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        found.add(f"{slug}-{n}" if n else slug)
        seen[slug] = n + 1
    return found


def test_the_quickstart_is_two_commands_on_the_first_screen_one_trains_one_runs_what_ci_runs():
    test = ci_test_command()
    train = test.replace(" && .venv/bin/python -m pytest", " && .venv/bin/normtrain")
    assert test.endswith(" && .venv/bin/python -m pytest") and train != test
    assert quickstart_commands() == [train, test]
    assert f"\n{train}\n{test}\n" in FIRST_SCREEN
    assert "embedded corpus" in FIRST_SCREEN and "is the command CI runs" in FIRST_SCREEN


def test_the_first_screen_says_what_normtrain_is_and_the_three_things_with_a_command_and_a_link_each():
    assert FIRST_SCREEN.startswith("# normtrain\n") and "the normalization is the experiment" in FIRST_SCREEN
    commands = [line.strip() for line in re.findall(r"```bash\n(.*?)```", FIRST_SCREEN, flags=re.S)]
    for needles, links in [(["normtrain -m ", "normtrain-compare "], ["#sweeps", "#comparing-runs"]),
                           (["normtrain-ablate "], ["#is-x-better-than-y"]),
                           (["normtrain-reproduce "], ["#reproducing-the-stability-results"])]:
        assert any(all(n in c for n in needles) for c in commands), needles
        assert all(f"]({link})" in FIRST_SCREEN for link in links), links
    assert "](#installing-torch-cpu-or-cuda)" in FIRST_SCREEN


def test_the_install_section_says_what_each_torch_build_costs_and_how_to_get_the_cpu_one():
    section = README.split("## Installing: torch CPU or CUDA\n", 1)[1].split("\n## ", 1)[0]
    assert CPU_INDEX in section and "pip install torch==2.13.0 " + CPU_INDEX in section
    cuda, cpu = (line for line in section.splitlines() if line.startswith(("| CUDA", "| CPU")))
    assert "2.99 GB in 103 files" in cuda and "5.5 GB" in cuda and "issue 57" in cuda  # the issue's, cited
    assert "735 MB in 83 files" in cpu and "2.7 GB" in cpu and "du -sh" in cpu  # measured here


def test_every_link_to_a_section_of_the_page_lands_on_a_heading():
    links = set(re.findall(r"\]\(#([^)]+)\)", README))
    assert links and not links - anchors(README), sorted(links - anchors(README))
