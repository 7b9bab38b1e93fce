"""The results page's one-line answers: up to which load speculation pays, per deployment and acceptance rate."""

from vidur_specdec.report.answer import answer
from vidur_specdec.report.results import deployment_key, deployment_label


def _row(qps, k, speedup, attention="per_token", alpha=0.6, method="ngram"):
    return {"model": "meta-llama/Llama-2-7b-hf", "device": "a100", "tensor_parallel_size": 1, "num_replicas": 1,
            "qps": qps, "method": method, "k": k, "acceptance_rate": alpha, "verify_attention": attention,
            "tpot_speedup": speedup}


def _answer(rows):
    return answer(rows, lambda m: {"ngram": "n-gram"}.get(m, m), deployment_key, deployment_label)


def test_pays_up_to_the_last_load_before_the_first_loss():
    rows = [_row(2, 2, 1.5), _row(2, 4, 1.8), _row(6, 4, 1.1), _row(12, 2, 0.9), _row(12, 4, 0.7),
            _row(12, 4, 1.4, attention="shared_kv")]  # the optimistic bound is not what decides
    (line,) = _answer(rows)
    assert line == ("Llama-2-7b-hf on A100, TP 1, α 0.6: speculation pays up to 6 req/s (n-gram k = 4 (1.10×)); "
                    "at 12 req/s nothing recorded pays (best n-gram k = 2 (0.90×)).")


def test_pays_everywhere_and_one_line_per_acceptance_rate():
    rows = [_row(2, 4, 2.0, alpha=0.8), _row(12, 4, 1.2, alpha=0.8), _row(2, 4, 0.95, alpha=0.4)]
    lines = _answer(rows)
    assert lines[0].startswith("Llama-2-7b-hf on A100, TP 1, α 0.8: speculation pays at every recorded load (2–12")
    assert lines[1].endswith("speculation does not pay even at 2 req/s (best n-gram k = 4 (0.95×)).")


def test_baseline_rows_are_not_candidates():
    rows = [_row(2, 0, 1.0, method="none"), _row(2, 4, 1.3, attention="shared_kv")]
    (line,) = _answer(rows)
    assert "pays at every recorded load" in line and "1.30×" in line
