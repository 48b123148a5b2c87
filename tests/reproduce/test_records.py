"""What result.json and the index say beyond the checks: a rerun that moved a checked number (a finding, with its
size), the primary and secondary checks in separate columns (v3 records readable as they are), and a GPU verdict
that disagrees with the CPU one; a render that leaves no figure of an earlier design behind."""

from __future__ import annotations

import json

from normtrain.reproduce.index import BEGIN, END, update_index
from normtrain.reproduce.records import rerun, same_configuration
from normtrain.reproduce.writeup import rerun_text


def result(values: dict[str, float], digest: str = "abc", grid: dict | None = None, **extra) -> dict:
    """A result.json with one check whose per-seed values are ``values``."""
    return {"scale": "cpu", "grid": grid or {"placement": ["post", "pre"], "train.seed": ["0", "1"]},
            "base": ["experiment=x"], "provenance": {"declaration": {"digest": digest}, "run_commits": {"c0": 4}},
            "execution": {"threads": {"2": 4}},
            "checks": [{"id": "post_penalty", "conditions": {"lr 1e-3": {"per_seed": values}}}], **extra}


def test_a_rerun_of_the_same_configuration_that_moves_a_checked_value_is_reported_with_its_size():
    before = result({"0": 0.60, "1": 0.40})
    after = result({"0": 0.79, "1": 0.40})  # xiong_warmup's Post-LN moved by 0.19 nats on a rerun
    found = rerun(before, after)
    assert (found["compared"], found["moved"]) == (2, 1)
    assert found["largest"]["post_penalty"]["delta"] == 0.79 - 0.60 and found["largest"]["post_penalty"]["seed"] == "0"
    text = rerun_text(found)
    assert text.startswith("**Rerun finding.**") and "1 of 2 checked per-seed values moved" in text
    assert "`post_penalty` by 0.190 (lr 1e-3, seed 0: 0.600 → 0.790)" in text and "'threads'" in text
    same = rerun(before, result({"0": 0.60, "1": 0.40}))
    assert same["moved"] == 0 and "are the same" in rerun_text(same)


def test_only_an_unchanged_configuration_is_compared():
    before = result({"0": 0.60})
    assert rerun(before, result({"0": 0.7}, digest="changed")) is None  # the declaration changed: a new design
    assert rerun(before, result({"0": 0.7}, grid={"train.seed": ["0"]})) is None  # another grid
    assert rerun(None, result({"0": 0.7})) is None and rerun({**before, "smoke": True}, result({"0": 0.7})) is None
    old = {k: v for k, v in before.items() if k not in ("grid", "base")} | {"command": "normtrain-reproduce x"}
    assert same_configuration(old, {**result({}), "command": "normtrain-reproduce x"})  # older records: the command
    assert rerun_text(None) == ""


def write_result(folder, record: dict) -> None:
    folder.mkdir()
    (folder / "result.json").write_text(json.dumps(record))


BASE = {"claim": "c", "paper_number": "p", "ours": "o", "key": "k", "norm": "LayerNorm", "wall_time_s": 60,
        "device": "CPU (2 cores)", "registration": "after_pilot", "provenance": {"declaration": {"before_runs": True}}}


def test_the_index_shows_the_primary_and_secondary_checks_apart_and_keeps_v3_records_readable(tmp_path):
    index = tmp_path / "README.md"
    index.write_text(f"# Experiments\n\n{BEGIN}\nold\n{END}\n")
    write_result(tmp_path / "xiong_warmup", {**BASE, "name": "xiong_warmup", "scale": "cpu",
                                             "verdict": "partly reproduced",
                                             "checks": [{"id": "a", "ok": True}, {"id": "b", "ok": False}]})
    v4 = {**BASE, "name": "xiong_warmup", "scale": "gpu", "protocol": 4, "verdict": "not reproduced",
          "primary": {"id": "post_penalty_exceeds_pre", "ok": False, "source": "paper"},
          "secondary": [{"id": "adam_grows", "ok": True, "source": "ours"}],
          "cpu_verdict": "partly reproduced", "agrees_with_cpu": False}
    write_result(tmp_path / "xiong_warmup-gpu", v4)
    update_index(index, order=["xiong_warmup"])
    rows = [line for line in index.read_text().splitlines() if line.startswith("| [")]
    assert [r.split("`")[1] for r in rows] == ["xiong_warmup", "xiong_warmup-gpu"]  # the CPU baseline first
    cpu, gpu = (r.split(" | ") for r in rows)
    assert cpu[4:7] == ["– (v3: no primary check)", "v3, all weighed alike: 1 of 2 hold", "**partly reproduced**"]
    assert gpu[4:7] == ["`post_penalty_exceeds_pre` **fails**", "`adam_grows` (ours) holds",
                        "**not reproduced** (the CPU result: partly reproduced)"]


def test_a_v4_readme_names_the_deciding_check_and_reports_the_others_beside_it():
    from normtrain.reproduce.runner import Findings
    from normtrain.reproduce.writeup import registration_section, verdict_section
    from normtrain.study.preregistration import Registration, Rule
    from normtrain.study.verdicts import decide

    reg = Registration(
        "c", "d", "n", "m", "LN",
        primary=Rule("deepnorm_smaller", "DeepNorm's update is smaller", "ratio", ">=", 3.0, basis="Fig. 4a"),
        secondary=(Rule("adam_grows", "under Adam DeepNorm's update grows", "slope", ">", 0.3, basis="b",
                        source="ours"),),
        preconditions=(Rule("unsaturated", "step 1's update is below 1", "step1", "<", 1.0, basis="b"),))
    seeds = {"": {"0": 5.0, "1": 6.0, "2": 4.0}}
    judged = decide(reg, {"ratio": seeds, "slope": {"": {"0": 0.1, "1": 0.2, "2": 0.1}},
                          "step1": {"": {"0": 0.5, "1": 0.4, "2": 0.6}}}, lambda q: "seeds")
    findings = Findings(table="", measured={}, figures={}, key="the key", ours="o")
    text = verdict_section(judged, {"verdict": judged.verdict}, findings, "")
    assert text.startswith("## Verdict: reproduced\n\nWhy: the primary check deepnorm_smaller held.")
    assert "**Primary (the paper's claim).** `deepnorm_smaller`" in text and "Holds: yes." in text
    assert "Secondary checks, reported beside the verdict (they do not change it)" in text
    assert "| adam_grows *(ours)* |" in text and "| unsaturated |" in text
    record = {"provenance": {"declaration": {"files": ["x.py"], "commit": None}, "code_commit": None},
              "pilot_seeds_rerun": []}
    declared = registration_section(reg, judged, record)
    assert "**Protocol v4.**" in declared and "| adam_grows | secondary (reported) |" in declared
    assert "*(ours, not the paper's)*" in declared and "| deepnorm_smaller | primary (decides) |" in declared


def test_a_render_deletes_the_figures_an_earlier_design_drew_and_this_one_does_not(tmp_path):
    from normtrain.reproduce.writeup import draw_figures

    (tmp_path / "val_loss.png").write_bytes(b"v3's figure")  # xiong_warmup's v3 figure, stale beside v4's
    (tmp_path / "warmup.png").write_bytes(b"old")
    (tmp_path / "runs.csv").write_text("kept")
    drawn = draw_figures(tmp_path, {"warmup.png": lambda p: p.write_bytes(b"new"),
                                    "penalty.png": lambda p: p.write_bytes(b"new")})
    assert drawn == ["warmup.png", "penalty.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["penalty.png", "runs.csv", "warmup.png"]
    assert (tmp_path / "warmup.png").read_bytes() == b"new"


def test_the_index_gives_a_v5_verdict_its_reason_its_budget_and_whose_claim_it_tests(tmp_path):
    index = tmp_path / "README.md"
    v5 = {**BASE, "scale": "cpu", "protocol": 5, "paper": "Xiong et al. 2020", "verdict": "reproduced",
          "verdict_why": "the 90% t interval clears >= 0.1",
          "budget": {"steps": 2000, "half_steps": 1000, "tokens": 2000 * 16 * 128},
          "primary": {"id": "post_needs_warmup", "ok": True, "source": "paper"},
          "v5": {"budget": {"": {"call_half": "holds", "ok": True, "crossing_doublings": None}}}}
    write_result(tmp_path / "xiong_warmup", {**v5, "name": "xiong_warmup"})
    write_result(tmp_path / "peri_variance", {
        **v5, "name": "peri_variance", "verdict": "inconclusive (budget-sensitive)", "verdict_why": "crosses",
        "primary": {"id": "peri_lower", "ok": None, "source": "secondary"},
        "v5": {"budget": {"L=24": {"call_half": "open", "ok": False, "crossing_doublings": 1.25}}}})
    write_result(tmp_path / "admin_output_change", {
        **v5, "name": "admin_output_change", "budget": None, "primary": {"id": "slope", "ok": True, "source": "ours"},
        "v5": {"budget": {"not_applicable": "a model measured at initialization"}}})
    write_result(tmp_path / "norm_types", {**BASE, "name": "norm_types", "scale": "cpu", "protocol": 4,
                                           "verdict": "reproduced", "primary": {"id": "rms", "ok": True}})
    update_index(index, order=["xiong_warmup", "peri_variance", "admin_output_change", "norm_types"])
    rows = {r.split("`")[1]: r.split(" | ") for r in index.read_text().splitlines() if r.startswith("| [")}
    assert rows["xiong_warmup"][6:10] == [
        "**reproduced**", "the 90% t interval clears >= 0.1",
        "T = 2000 steps (4.10M tokens): the same call at T and T/2 = 1000, and one doubling past T, extrapolated",
        "the paper: Xiong et al. 2020"]
    assert rows["peri_variance"][8:10] == [
        "T = 2000 steps (4.10M tokens): budget-sensitive at L=24 (open at T/2; the line crosses about 1.2 doublings "
        "past T)", "a secondary source: Xiong et al. 2020"]
    assert rows["admin_output_change"][8:10] == ["none applies: a model measured at initialization",
                                                 "ours (a hypothesis of this project)"]
    assert rows["norm_types"][7:9] == ["–", "– (before v5: one budget)"]


def test_a_v5_record_without_its_budget_steps_still_gets_a_budget_cell():
    """A v5 result written before result.json recorded its steps (or a design without T/2 runs) says T alone."""
    from normtrain.reproduce.index import budget_cell

    record = {"protocol": 5, "v5": {"budget": {"": {"call_half": "holds", "ok": True}}}}
    assert budget_cell(record) == "T: the same call at T and T/2, and one doubling past T, extrapolated"
    assert budget_cell({"protocol": 5, "v5": {"budget": {}}}) == "T; T/2 not read (see why)"
    withheld = {"protocol": 5, "verdict": "inconclusive (precondition)", "budget": {"steps": 1600, "tokens": 3276800}}
    assert budget_cell(withheld) == "T = 1600 steps (3.28M tokens); not read (see why)"  # no v5 block: not "before v5"


def test_a_check_whose_interval_is_open_reads_open_in_the_index_and_an_unmeasured_one_not_measured():
    """v5's interval rule has three calls: a measured check that neither holds nor fails is *open*; only a check
    with no measured condition is *not measured*."""
    from normtrain.reproduce.index import check_cell

    measured = {"id": "gap_at_48", "source": "ours", "ok": None, "conditions": {"48 layers": {"n": 3}}}
    assert check_cell(measured) == "`gap_at_48` (ours) open"
    assert check_cell({"id": "gap_at_48", "ok": None, "conditions": {}}) == "`gap_at_48` not measured"
    infeasible = {"id": "step_time", "ok": None, "conditions": {"CPU scale (infeasible)": {"n": 0}}}
    assert check_cell(infeasible) == "`step_time` not measured"
    failed = {"id": "gap_at_48", "ok": False, "conditions": {"48 layers": {"n": 3}}}
    assert check_cell(failed) == "`gap_at_48` **fails**"
    assert check_cell({"id": "gap_at_48", "ok": True}) == "`gap_at_48` holds"
