"""Workload generation (item 1): seeded arrivals, exact lengths, one trace both sides read."""

import json

import numpy as np
import pandas as pd
import pytest

from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import load
from vidur_specdec.validate.cli import main
from vidur_specdec.validate.workload import generate_trace, load_trace, write_trace
from vidur_specdec.engine.workload import generate, read_trace


def _cfg(**w):
    base = {"num_requests": 200, "qps": 5.0, "prompt_tokens": {"dist": "uniform", "min": 8, "max": 64},
            "output_tokens": {"dist": "uniform", "min": 4, "max": 32}}
    base.update(w)
    return load({"seed": 11, "workload": base})


def test_poisson_and_static_are_the_simulators_own_draws():
    cfg = _cfg()
    for arrival in ("poisson", "static"):
        cfg.workload.arrival = arrival
        sim = generate(cfg.workload, cfg.seed)
        df = generate_trace(cfg, arrival)
        assert df["arrival_offset_s"].tolist() == pytest.approx([s.arrived_at_s for s in sim])
        assert df["prompt_tokens"].tolist() == [s.prompt_tokens for s in sim]
        assert df["output_tokens"].tolist() == [s.output_tokens for s in sim]
        assert [len(x) for x in df["prompt_token_ids"]] == df["prompt_tokens"].tolist()


def test_gamma_arrivals_have_the_asked_rate_and_burstiness():
    cfg = _cfg(num_requests=20000, qps=10.0)
    gaps = np.diff(generate_trace(cfg, "gamma", cv=3.0)["arrival_offset_s"].to_numpy())
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)
    again = generate_trace(cfg, "gamma", cv=3.0)
    assert again["arrival_offset_s"].diff().iloc[1:].to_numpy() == pytest.approx(gaps)  # seeded


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_trace_round_trip_and_the_simulator_reads_it(tmp_path, suffix):
    df = generate_trace(_cfg(num_requests=30), "poisson")
    path = write_trace(df, tmp_path / f"trace{suffix}")
    back = load_trace(path)
    assert back["request_id"].tolist() == list(range(30))
    assert back["prompt_token_ids"].tolist() == df["prompt_token_ids"].tolist()
    sim = read_trace(str(path))
    assert [s.prompt_tokens for s in sim] == df["prompt_tokens"].tolist()
    assert [s.output_tokens for s in sim] == df["output_tokens"].tolist()
    assert [s.arrived_at_s for s in sim] == pytest.approx(df["arrival_offset_s"].tolist())


def test_load_trace_sorts_like_the_simulator_and_keeps_ids(tmp_path):
    p = tmp_path / "t.csv"
    pd.DataFrame({"request_id": ["c", "a", "b"], "arrived_at_s": [0.3, 0.1, 0.1],
                  "prompt_tokens": [3, 2, 1], "output_tokens": [5, 6, 7]}).to_csv(p, index=False)
    t = load_trace(p)
    assert t["request_id"].tolist() == ["a", "b", "c"]
    assert t["sim_index"].tolist() == [0, 1, 2]
    assert t["prompt_token_ids"].tolist() == [None, None, None]
    assert [s.prompt_tokens for s in read_trace(str(p))] == t["prompt_tokens"].tolist()


@pytest.mark.parametrize("content, match", [
    ("request_id,prompt_tokens\n1,2\n", "lacks columns"),
    ("arrival_offset_s,prompt_tokens,output_tokens\n0.1,0,3\n", "prompt_tokens"),
    ("arrival_offset_s,prompt_tokens,output_tokens,prompt_token_ids\n0.1,2,3,5 6 7\n", "prompt token ids"),
    ("request_id,arrival_offset_s,prompt_tokens,output_tokens\n1,0,2,3\n1,0,2,3\n", "unique"),
])
def test_bad_traces(tmp_path, content, match):
    p = tmp_path / "t.csv"
    p.write_text(content)
    with pytest.raises(ConfigError, match=match):
        load_trace(p)


def test_generate_cli(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("seed: 2\nworkload: {num_requests: 7, qps: 3}\n")
    out = tmp_path / "t.jsonl"
    assert main(["generate", "--config", str(cfg), "--out", str(out), "--arrival", "gamma", "--cv", "2"]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 7 and all(len(r["prompt_token_ids"]) == r["prompt_tokens"] for r in rows)
    rc = main(["generate", "--config", str(cfg), "--out", str(tmp_path / "t.txt")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and not (tmp_path / "t.txt").exists()
    with pytest.raises(SystemExit) as e:
        main(["generate", "--config", str(cfg), "--out", str(out), "--arrival", "weibull"])
    assert e.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_replay_and_run_draw_the_same_ids_for_a_trace_without_them():
    """A simulator-format trace gets generate's ids (stream [seed, 2]) whichever command replays it."""
    import pandas as pd

    from vidur_specdec.validate.workload import prompt_ids, with_token_ids

    t = pd.DataFrame({"request_id": [0, 1], "arrival_offset_s": [0.0, 0.5], "prompt_tokens": [5, 7],
                      "output_tokens": [3, 4]})
    got = with_token_ids(t, 0)
    assert [list(x) for x in got["prompt_token_ids"]] == [list(x) for x in prompt_ids([5, 7], 0)]
