"""The Python API checks its arguments as the command line checks its options: a value the option's parser
takes from its text is taken (``jobs="2"``, ``loads="1,8"``), anything else is one ConfigError naming the
keyword, before any work; one override string is one override."""

import argparse
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vidur_specdec import ConfigError

OPTIONS = {"k_max": "--k-max", "objective": "--objective", "slo_ttft_ms": "--slo-ttft-ms",
           "slo_tpot_ms": "--slo-tpot-ms", "slo_percentile": "--slo-percentile", "load_axis": "--load-axis",
           "loads": "--loads", "warmup_requests": "--warmup-requests", "tolerance": "--tolerance", "jobs": "--jobs",
           "executor": "--executor"}
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 100), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from(["1,2", "abc", "2", "2.5", "0.05", "tpot", "goodput", "qps", "concurrency",
                                    "local", "ray", "foo", "99", "", " 4 ", "nan", "1e3"]),
                   st.lists(st.floats(0.1, 50), max_size=3), st.just([1, "x"]), st.just({"a": 1}))


class _Ran(Exception):
    """The stub's signal: the arguments passed the API's checks and reached the command."""


def _cli_parse(option, text):
    from vidur_specdec.tune import cli

    ap = argparse.ArgumentParser(exit_on_error=False)
    cli.add_arguments(ap)
    try:
        ns = ap.parse_args(["--config", "c.yaml", "--output-dir", "o", option, text])
    except (argparse.ArgumentError, SystemExit):
        return None
    return vars(ns)[option[2:].replace("-", "_")]


@settings(max_examples=80)
@given(name=st.sampled_from(sorted(OPTIONS)), value=VALUES)
def test_tune_takes_what_the_command_line_takes_and_names_the_keyword_otherwise(name, value):
    from vidur_specdec.tune import api, cli

    seen = {}

    def stub(args, log=None):
        seen.update(vars(args))
        raise _Ran

    real = cli.execute
    cli.execute = stub
    try:
        api.tune("configs/default.yaml", **{name: value})
        raise AssertionError("the stub always raises")
    except _Ran:
        accepted = True
    except ConfigError as e:
        accepted = False
        assert str(e).startswith(f"{name}: ") and "\n" not in str(e), str(e)
    finally:
        cli.execute = real
    if value is None:  # an option without a default of its own takes None as "the command's default"
        assert accepted == (name not in ("objective", "load_axis", "executor"))
        return
    if isinstance(value, (str, int, float)) and not isinstance(value, bool) and name != "loads":
        text = value if isinstance(value, str) else repr(value)
        parsed = _cli_parse(OPTIONS[name], text)
        if parsed is None:  # the command line refuses the text: so does the API
            assert not accepted
        elif accepted:
            got = seen[name]
            assert got == parsed or (isinstance(got, float) and math.isclose(got, parsed))
    if isinstance(value, bool) or isinstance(value, dict):
        assert not accepted
    if name == "executor" and accepted:
        assert seen["executor"] in ("local", "ray")  # never a silent local run of an unknown executor
    if name == "loads" and accepted and not isinstance(value, str):
        assert [float(x) for x in seen["loads"].split(",")] == [float(x) for x in value]


@pytest.mark.parametrize("call", ["simulate", "sweep"])
def test_one_override_string_is_one_override_not_its_characters(call, monkeypatch):
    from vidur_specdec import load

    assert load("configs/default.yaml", "speculative.num_speculative_tokens=2").speculative.num_speculative_tokens == 2
    if call == "sweep":
        from vidur_specdec.sweep import api, definition

        got = {}

        def stub(config, overrides=None, name=None):
            got["overrides"] = overrides
            raise ConfigError("stop")

        monkeypatch.setattr(definition, "load_sweep", stub)
        with pytest.raises(ConfigError, match="stop"):
            api.sweep("sweeps/specdec_39.yaml", "base.seed=3")
        assert got["overrides"] == ["base.seed=3"]


@pytest.mark.parametrize("kwargs,named", [({"jobs": 1.5}, "jobs"), ({"executor": "foo"}, "executor"),
                                          ({"overwrite": "yes"}, "overwrite"), ({"output_dir": 3}, "output_dir")])
def test_sweep_names_a_bad_keyword(kwargs, named):
    from vidur_specdec import sweep

    with pytest.raises(ConfigError, match=f"^{named}: "):
        sweep("sweeps/specdec_39.yaml", **kwargs)


@pytest.mark.parametrize("fn", ["simulate", "run_vidur_sarathi", "load"])
@pytest.mark.parametrize("kwargs,named", [({"overrides": 5}, "overrides"), ({"overrides": [1]}, "overrides")])
def test_the_run_functions_name_a_bad_keyword(fn, kwargs, named):
    import vidur_specdec

    with pytest.raises(ConfigError, match=f"^{named}: "):
        getattr(vidur_specdec, fn)("configs/default.yaml", **kwargs)


def test_a_call_without_an_output_folder_leaves_nothing_behind_even_when_it_fails(tmp_path):
    """``tune()``/``plan()`` with no ``output_dir`` write into a temporary folder that is removed when the call
    ends, failed or not; a given folder is the caller's and stays."""
    from vidur_specdec.console import api_output

    with api_output(tmp_path / "mine", "tune") as (out, kept):
        assert (out, kept) == (tmp_path / "mine", True)
    with api_output(None, "plan") as (out, kept):
        out.mkdir()
        (out / "plan.csv").write_text("x\n")
        assert not kept and out.name == "plan"
    assert not out.parent.exists()
    with pytest.raises(ValueError):
        with api_output(None, "tune") as (out, kept):
            out.mkdir()
            raise ValueError("a failed call")
    assert not out.parent.exists()
