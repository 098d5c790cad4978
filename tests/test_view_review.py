"""People's labels in `llmbench view`: the label form's lines, the review queue and its filters,
blind mode, a broken labels file, the calibration page, a forged form, concurrent writes, and
the whole flow by keyboard and mouse in a real Chromium over a run made against the fake server.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.results.reviews import (
    Review,
    ReviewKey,
    answer_digest,
    append_review,
    load_labels,
    read_reviews,
)
from pytest_llmbench.results_folder import REVIEWS_FILE
from pytest_llmbench.view.app import ViewSettings, create_app
from pytest_llmbench.view.review import (
    QueueFilter,
    judges_split,
    label_disagrees,
    queue_items,
)
from pytest_llmbench.view.runs import Run, load_run

RUBRIC = """
cases:
  - {id: one, prompt: "Question one?", assert: [{type: llm-rubric, value: is a good answer}]}
  - {id: two, prompt: "Question two?", assert: [{type: llm-rubric, value: is a good answer}]}
  - {id: three, prompt: "Question three?", assert: [{type: llm-rubric, value: is a good answer}]}
  - {id: four, prompt: "Question four?", expected: answer,
     assert: [contains, {type: llm-rubric, value: is polite}]}
  - {id: plain, prompt: "Question five?", expected: answer, assert: [contains]}
"""


def script(bench: Bench) -> None:
    server = bench.server
    server.reset()
    server.add_rule(
        Rule(model="fake-model-2", match="bad answer", reply='{"score": 0.1, "reason": "bad"}')
    )
    server.add_rule(Rule(model="fake-model-2", reply='{"score": 0.9, "reason": "fine work"}'))
    server.add_rule(Rule(match="three", reply="a bad answer"))
    server.add_rule(Rule(reply="a good answer"))


@pytest.fixture
def judged_run(bench: Bench) -> tuple[Bench, Path]:
    """One finished run under results/r: four judged items (three passed, one failed) and a
    plain one, judged by fake2."""
    bench.eval_file("rubric", RUBRIC)
    script(bench)
    root = bench.pytester.path / "results"
    result = bench.pytester.runpytest(
        "-p", "no:cacheprovider", f"--results-dir={root / 'r'}", "--models=fake", "--judges=fake2"
    )  # fmt: skip
    assert (root / "r" / "run.json").is_file(), result.stdout.str()[-3000:]
    return bench, root


@pytest.fixture
def client(judged_run: tuple[Bench, Path]) -> Iterator[Any]:
    from starlette.testclient import TestClient

    bench, root = judged_run
    settings = ViewSettings(
        roots=[root], project=bench.pytester.path, allowed_hosts=("testserver",)
    )
    with TestClient(create_app(settings), follow_redirects=False) as test_client:
        yield test_client


def record_of(root: Path, case: str) -> dict[str, Any]:
    run = load_run([root], "0/r")
    return next(dict(r) for r in run.records if r["case_id"] == case)


def test_a_label_form_writes_its_line_with_key_digest_and_machine_verdict(
    client: Any, judged_run: tuple[Bench, Path]
) -> None:
    _, root = judged_run
    three = record_of(root, "three")
    assert three["outcome"] == "failed"
    form = {"nodeid": three["nodeid"], "target": "0", "label": "pass", "comment": "<b>fine</b>"}
    answer = client.post("/run/0/r/label", data=form)
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/run/0/r/item?nodeid=")
    client.post("/run/0/r/label", data={**form, "target": "item", "label": "fail", "comment": ""})
    lines = [json.loads(line) for line in (root / "r" / REVIEWS_FILE).read_text().splitlines()]
    assert len(lines) == 2
    first, second = lines
    assert (first["case"], first["model"], first["repeat"]) == (three["case_hash"], "fake", 0)
    assert first["assertion"] == 0 and second["assertion"] is None
    assert first["answer"] == answer_digest(three) == second["answer"]
    assert first["label"] == "pass" and first["comment"] == "<b>fine</b>"
    assert first["machine"] == {
        "passed": False, "type": "llm-rubric", "judges": ["fake2"],
        "criterion": "is a good answer",
    }  # fmt: skip
    assert second["machine"]["passed"] is False and second["label"] == "fail"
    assert first["nodeid"] == three["nodeid"] and first["run"] == "r" and first["at"]
    # The item page shows both labels, the comment escaped, and the machine beside.
    page = client.get("/run/0/r/item", params={"nodeid": three["nodeid"]}).text
    assert "&lt;b&gt;fine&lt;/b&gt;" in page and "<b>fine</b>" not in page
    assert page.count('data-label="pass"') == 1 and page.count('data-label="fail"') == 1
    # clear takes the assertion's label back
    client.post("/run/0/r/label", data={**form, "label": "clear"})
    labels = load_labels([root / "r" / REVIEWS_FILE])
    assert labels.for_record(three, 0) is None and labels.for_record(three, None) is not None
    # A form that is no label is refused, nothing written
    bad = client.post("/run/0/r/label", data={**form, "label": "maybe"})
    assert bad.status_code == 400 and "maybe" in bad.text
    assert len(read_reviews(root / "r" / REVIEWS_FILE)) == 3


def test_the_viewer_shows_a_persons_verdict_and_the_machines_when_labels_break(
    client: Any, judged_run: tuple[Bench, Path]
) -> None:
    _, root = judged_run
    three = record_of(root, "three")
    form = {"nodeid": three["nodeid"], "target": "item", "label": "pass", "comment": ""}
    assert client.post("/run/0/r/label", data=form).status_code == 303
    shown = record_of(root, "three")
    assert (shown["outcome"], shown["verdict_source"], shown["machine_outcome"]) == (
        "passed",
        "human",
        "failed",
    )
    assert load_run([root], "0/r").labels is not None
    labels_file = root / "r" / REVIEWS_FILE
    labels_file.write_text(labels_file.read_text() + "{broken\n")
    broken = load_run([root], "0/r")
    assert broken.labels is None and ":2: not JSON" in broken.labels_error
    assert next(r for r in broken.records if r["case_id"] == "three")["outcome"] == "failed"


def test_a_forged_form_from_another_site_writes_no_label(
    client: Any, judged_run: tuple[Bench, Path]
) -> None:
    _, root = judged_run
    one = record_of(root, "one")
    form = {"nodeid": one["nodeid"], "target": "item", "label": "fail"}
    refused = client.post("/run/0/r/label", data=form, headers={"origin": "http://evil.example"})
    assert refused.status_code == 403
    assert not (root / "r" / REVIEWS_FILE).exists()
    ours = client.post("/run/0/r/label", data=form, headers={"origin": "http://testserver"})
    assert ours.status_code == 303 and len(read_reviews(root / "r" / REVIEWS_FILE)) == 1


def test_labels_go_to_the_reviews_dir_when_given(judged_run: tuple[Bench, Path]) -> None:
    from starlette.testclient import TestClient

    bench, root = judged_run
    shared = bench.pytester.path / "labels"
    settings = ViewSettings([root], bench.pytester.path, ("testserver",), reviews_dir=shared)
    one = record_of(root, "one")
    with TestClient(create_app(settings), follow_redirects=False) as client:
        form = {"nodeid": one["nodeid"], "target": "item", "label": "fail"}
        assert client.post("/run/0/r/label", data=form).status_code == 303
        assert not (root / "r" / REVIEWS_FILE).exists()
        assert [r.label for r in read_reviews(shared / REVIEWS_FILE)] == ["fail"]
        # the queue counts it as labelled, the calibration page reads it
        assert "3 of 4 left" in client.get("/review").text
        calibration = client.get("/calibration").text
        assert "too few labels (1 &lt; 50)" in calibration and "fake2" in calibration


def test_a_broken_labels_file_is_shown_with_its_line_and_blocks_writing(
    client: Any, judged_run: tuple[Bench, Path]
) -> None:
    _, root = judged_run
    one = record_of(root, "one")
    path = root / "r" / REVIEWS_FILE
    good = Review(ReviewKey(one["case_hash"], "fake", 0), answer_digest(one), "pass")
    append_review(path, good)
    path.write_text(path.read_text() + '{"case": "x", "label": "pass",\n')  # an edit gone wrong
    before = path.read_text()
    for url in ("/run/0/r/item?nodeid=" + one["nodeid"], "/review", "/calibration"):
        page = client.get(url)
        assert page.status_code == 200, url
        assert f"{path}:2: not JSON" in page.text, url
    item = client.get("/run/0/r/item", params={"nodeid": one["nodeid"]}).text
    assert 'value="pass" disabled' in item  # no label can be given
    refused = client.post(
        "/run/0/r/label", data={"nodeid": one["nodeid"], "target": "item", "label": "fail"}
    )
    assert refused.status_code == 409 and f"{path}:2:" in refused.text
    assert path.read_text() == before


def test_the_queue_walks_unlabelled_judged_items_with_its_filters(
    client: Any, judged_run: tuple[Bench, Path]
) -> None:
    _, root = judged_run
    page = client.get("/run/0/r/review").text
    assert "4 of 4 left" in page  # the plain item is not judged
    assert page.count("<tr data-nodeid=") == 4 and "plain" not in page
    failed = client.get("/review", params={"verdict": "failed"}).text
    assert failed.count("<tr data-nodeid=") == 1 and "three" in failed
    passed = client.get("/review", params={"verdict": "passed", "blind": "1"}).text
    assert passed.count("<tr data-nodeid=") == 3 and ">hidden<" in passed
    assert client.get("/review", params={"model": "nope"}).text.count("<tr data-nodeid=") == 0
    # Label one through the queue: the next unlabelled item opens, and the count drops.
    one = record_of(root, "one")
    form = {"nodeid": one["nodeid"], "target": "item", "label": "pass", "queue": "1"}
    answer = client.post("/run/0/r/label", data=form)
    assert "queue=1" in answer.headers["location"] and "two" in answer.headers["location"]
    assert "3 of 4 left" in client.get("/review").text
    assert client.get("/review", params={"labelled": "1"}).text.count("labelled</td>") == 1
    # Blind: after the label the same item, now revealed with agree / disagree.
    three = record_of(root, "three")
    blind = {"nodeid": three["nodeid"], "target": "item", "queue": "1", "blind": "1"}
    page = client.get("/run/0/r/item", params=blind).text
    assert 'id="blind"' in page and "fine work" not in page and 'table class="judges"' not in page
    assert "machine:" not in page and ">failed<" not in page
    answer = client.post("/run/0/r/label", data={**blind, "label": "pass"})
    assert "three" in answer.headers["location"] and "blind=1" in answer.headers["location"]
    page = client.get(answer.headers["location"]).text
    assert 'id="blind"' not in page and 'data-agree="0"' in page and "you disagree" in page
    assert 'class="judges"' in page


def _record(case: str, model: str, repeat: int, scores: list[float], passed: bool) -> dict:
    judges = [
        {"assertion": 0, "judge": f"j{i}", "scores": {"rubric": s}, "error": None}
        for i, s in enumerate(scores)
    ]
    return {
        "nodeid": f"e.eval.yaml::{case}[{model}-{repeat}]", "case_hash": case, "case_id": case,
        "model": model, "repeat": repeat, "response": f"{case} {repeat}",
        "outcome": "passed" if passed else "failed",
        "assertions": [{"type": "llm-rubric", "passed": passed, "criterion": "ok"}],
        "judges": judges,
    }  # fmt: skip


def test_disagreement_is_judges_split_or_a_label_elsewhere_saying_otherwise(
    tmp_path: Path,
) -> None:
    split = _record("a", "m1", 0, [0.8, 0.2], True)
    agree = _record("b", "m1", 0, [0.8, 0.6], True)
    jury = _record("c", "m2", 0, [4.0, 2.0], False)  # 1..5: 0.75 and 0.25
    again = _record("b", "m1", 1, [0.9], True)
    assert judges_split(split) and not judges_split(agree) and judges_split(jury)
    path = tmp_path / REVIEWS_FILE
    # A person failed repeat 1 of case b: repeat 0, passed by the judge, now disagrees.
    append_review(path, Review(ReviewKey("b", "m1", 1), answer_digest(again), "fail"))
    labels = load_labels([path])
    assert label_disagrees(agree, labels) and not label_disagrees(split, labels)
    run = Run("0/x", tmp_path, [split, agree, jury, again], None, None)
    chosen = QueueFilter(disagreement=True)
    kept = [item.record["case_id"] for item in queue_items([(run, labels)], chosen)]
    assert kept == ["a", "b", "c"]  # b repeat 1 is labelled
    by_model = queue_items([(run, labels)], QueueFilter(model="m2"))
    assert [item.record["case_id"] for item in by_model] == ["c"]
    assert len(queue_items([(run, labels)], QueueFilter(include_labelled=True))) == 4


def test_two_threads_appending_labels_lose_none(tmp_path: Path) -> None:
    path = tmp_path / REVIEWS_FILE

    def write(who: str) -> None:
        for i in range(200):
            key = ReviewKey(f"case-{i}", who, 0)
            append_review(path, Review(key, "0" * 16, "pass", comment="x" * 300, reviewer=who))

    threads = [threading.Thread(target=write, args=(who,)) for who in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reviews = read_reviews(path)  # every line whole: a torn one would raise
    assert len(reviews) == 400 and len(load_labels([path])) == 400


def _screenshots_module() -> Any:
    """benchmarks/review_screenshots.py, loaded by its path."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "review_screenshots.py"
    spec = importlib.util.spec_from_file_location("review_screenshots", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_review_by_keyboard_and_mouse_blind_in_two_tabs(judged_run: tuple[Bench, Path]) -> None:
    """In Chromium, `llmbench view --reviews-dir`: the screenshots script opens the blind
    queue's first item and labels it by key; then j, 1, c (a comment typed with the letters of
    shortcuts), Esc, f; n and a mouse click; two tabs posting at once; every label's line."""
    from browser import chromium_page, serving

    bench, root = judged_run
    shared = bench.pytester.path / "labels"
    path = shared / REVIEWS_FILE
    records = {r["case_id"]: r for r in load_run([root], "0/r").records}
    with serving(bench, root, "--reviews-dir", str(shared)) as url, chromium_page() as page:
        # 1. The screenshots (blind item, revealed after "p", queue, calibration).
        pngs = _screenshots_module().screenshots(page, url, bench.pytester.path / "img")
        assert [p.read_bytes()[:4] for p in pngs] == [b"\x89PNG"] * 4
        assert [r.label for r in read_reviews(path)] == ["pass"]
        # 2. Back to the blind queue: item two, the judges hidden until labelled.
        page.goto(url + "review?blind=1")
        assert "3 of 4 left" in page.inner_text("#left")
        page.click("#start")
        assert page.locator("#blind").is_visible() and page.locator("table.judges").count() == 0
        assert "fine work" not in page.content()
        assert "two" in page.url
        page.keyboard.press("k")  # previous: item one, labelled, so revealed
        page.wait_for_url(lambda u: "one" in u)
        assert page.locator("[data-agree='1']").count() == 1 and page.locator("#blind").count() == 0
        page.keyboard.press("j")
        page.wait_for_url(lambda u: "two" in u)
        page.keyboard.press("1")  # the judged assertion
        assert page.get_attribute("form.label.chosen", "data-target") == "0"
        page.keyboard.press("c")
        page.keyboard.type("judge: far past pfuj kind")  # shortcuts are off while typing
        page.keyboard.press("Escape")
        with page.expect_navigation():
            page.keyboard.press("f")
        assert page.locator("[data-agree='0']").count() == 1  # revealed: the judge passed it
        assert page.locator("table.judges").count() == 1
        # 3. Next (n) is item three; the mouse labels it unsure.
        page.keyboard.press("n")
        page.wait_for_url(lambda u: "three" in u)
        with page.expect_navigation():
            page.click("form.label[data-target=item] button[value=unsure]")
        # 4. Two tabs (two browser contexts), each labelling another item at once.
        browser = page.context.browser
        tabs = [browser.new_context().new_page(), browser.new_context().new_page()]
        for tab, case in zip(tabs, ("four", "plain"), strict=True):
            tab.goto(url + "run/0/r/item?nodeid=" + records[case]["nodeid"])
        for tab in tabs:
            tab.click("form.label[data-target=item] button[value=fail]", no_wait_after=True)
        for tab in tabs:
            tab.wait_for_selector("[data-label=fail]")
        page.goto(url + "review")
        assert "0 of 4 left" in page.inner_text("#left") and page.locator("#done").count() == 1
    reviews = read_reviews(path)
    assert not (root / "r" / REVIEWS_FILE).exists()  # --reviews-dir took them
    made = {(r.case_id, r.key.assertion, r.label, r.comment) for r in reviews}
    assert made == {
        ("one", None, "pass", ""),
        ("two", 0, "fail", "judge: far past pfuj kind"),
        ("three", None, "unsure", ""),
        ("four", None, "fail", ""),
        ("plain", None, "fail", ""),
    }
    for review in reviews:
        record = records[review.case_id]
        assert review.key.case == record["case_hash"] and review.answer == answer_digest(record)
    two = next(r for r in reviews if r.case_id == "two")
    assert two.machine is not None and two.machine.passed is True
    assert two.machine.judges == ("fake2",) and two.machine.criterion == "is a good answer"


def test_the_panel_lists_judged_assertions_first_and_the_others_folded(
    client: Any, judged_run: tuple[Bench, Path]
) -> None:
    _, root = judged_run
    four = record_of(root, "four")  # 0: contains (not judged), 1: llm-rubric
    page = client.get("/run/0/r/item", params={"nodeid": four["nodeid"]}).text
    targets = re.findall(r'<form class="label"[^>]*data-target="(\w+)"><b>(\d)</b>', page)
    assert targets == [("item", "0"), ("1", "1"), ("0", "2")]
    assert page.index('<details class="others">') < page.index('data-target="0"')
    assert "assertion 1 (llm-rubric: is polite)" in page
    form = {"nodeid": four["nodeid"], "target": "0", "label": "fail"}
    assert client.post("/run/0/r/label", data=form).status_code == 303
    (line,) = read_reviews(root / "r" / REVIEWS_FILE)
    assert line.key.assertion == 0 and line.machine is not None
    assert (line.machine.type, line.machine.judges, line.machine.passed) == ("contains", (), True)
    bad = client.post("/run/0/r/label", data={**form, "target": "7"})
    assert bad.status_code == 400 and "is not one of this item" in bad.text


def test_blind_mode_hides_a_conversations_verdicts_too() -> None:
    from pytest_llmbench.report import transcript
    from pytest_llmbench.view.review_pages import blinded

    verdict = {"type": "llm-rubric", "passed": False, "score": 0.1, "reason": "rude reply"}
    record = {
        "outcome": "failed", "score": 0.1, "conversation_stopped": "failed",
        "assertions": [{**verdict, "turn": 1}], "judges": [{"assertion": 0, "scores": {}}],
        "conversation": [
            {"turn": 1, "role": "user", "content": "hello", "generated": False},
            {"turn": 1, "role": "assistant", "content": "go away", "generated": True,
             "assertions": [verdict]},
        ],
    }  # fmt: skip
    assert "rude reply" in transcript(record)
    shown = transcript(blinded(record))
    assert "go away" in shown and "hello" in shown
    assert "rude reply" not in shown and "stop_on_fail" not in shown and "0.1" not in shown
    assert record["conversation"][1]["assertions"] == [verdict]  # the record is left whole


# -- runs written by hand (no model called) ------------------------------------------------------
JUDGED = {
    "nodeid": "e.eval.yaml::one[fake]", "case_id": "one", "case_hash": "h1", "model": "fake",
    "outcome": "failed", "passed": False, "score": 0.1, "repeat": 0, "response": "RESPONSE-TEXT",
    "metrics": {"llm-rubric": 0.123456},
    "attempts": [{"outcome": "failed", "score": 0.654321, "error": "ATTEMPT-ERR"}],
    "assertions": [{"type": "llm-rubric", "passed": False, "score": 0.1, "criterion": "c"}],
    "judges": [{"assertion": 0, "judge": "j", "type": "llm-rubric", "scores": {"score": 0.1},
                "reasons": {"score": "JUDGE-REASON"}}],
}  # fmt: skip
PLAIN = {"nodeid": "test_x.py::test_plain", "model": None, "outcome": "passed", "repeat": 0,
         "assertions": [], "judges": []}  # fmt: skip


def hand_client(root: Path, *records: dict[str, Any]) -> Any:
    """A test client over one run ``root/r`` of ``records``."""
    from starlette.testclient import TestClient

    run = root / "r"
    run.mkdir(parents=True, exist_ok=True)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "run.json").write_text(json.dumps({"started_at": "2026-01-01T00:00:00"}))
    settings = ViewSettings(roots=[root], project=root, allowed_hosts=("testserver",))
    return TestClient(create_app(settings), follow_redirects=False)


def test_an_item_that_called_no_model_gets_no_form_and_no_label(tmp_path: Path) -> None:
    # its key would have no model: a line reading refuses, breaking the whole labels file
    with hand_client(tmp_path, PLAIN, JUDGED) as client:
        page = client.get("/run/0/r/item", params={"nodeid": PLAIN["nodeid"]}).text
        assert 'id="not-reviewable"' in page and 'class="label"' not in page
        form = {"nodeid": PLAIN["nodeid"], "target": "item", "label": "pass"}
        refused = client.post("/run/0/r/label", data=form)
        assert refused.status_code == 400 and "called no model" in refused.text
        assert not (tmp_path / "r" / REVIEWS_FILE).exists()
        form = {"nodeid": JUDGED["nodeid"], "target": "0", "label": "fail"}
        assert client.post("/run/0/r/label", data=form).status_code == 303
    assert len(read_reviews(tmp_path / "r" / REVIEWS_FILE)) == 1


@pytest.mark.parametrize("target", ["²", "\u0661", "0" * 5000 + "1", "9" * 5000, "-1", " 0"])
def test_a_target_that_is_no_index_is_refused_not_a_server_error(
    tmp_path: Path, target: str
) -> None:
    with hand_client(tmp_path, JUDGED) as client:
        form = {"nodeid": JUDGED["nodeid"], "target": target, "label": "pass"}
        answer = client.post("/run/0/r/label", data=form)
    assert answer.status_code == 400 and "is not one of this item" in answer.text


def test_blind_mode_hides_earlier_attempts_and_every_figure_of_the_verdict(
    tmp_path: Path,
) -> None:
    overridden = {**JUDGED, "machine_outcome": "passed", "verdict_source": "human",
                  "review": {"label": "fail", "comment": "LABEL-NOTE"}}  # fmt: skip
    with hand_client(tmp_path, overridden) as client:
        params = {"nodeid": JUDGED["nodeid"], "blind": "1", "queue": "1"}
        page = client.get("/run/0/r/item", params=params).text
    assert "RESPONSE-TEXT" in page and 'id="blind"' in page
    for shown in ("JUDGE-REASON", "0.123", "0.654", "ATTEMPT-ERR", "Earlier attempts",
                  "LABEL-NOTE", "human", ">failed<", ">passed<"):  # fmt: skip
        assert shown not in page, shown


def test_the_judges_table_is_shown_once(tmp_path: Path) -> None:
    with hand_client(tmp_path, JUDGED) as client:
        page = client.get("/run/0/r/item", params={"nodeid": JUDGED["nodeid"]}).text
    assert page.count("JUDGE-REASON") == 1
    assert page.count('class="judges"') == 1 and "llmbench-judges" not in page
    assert "<td>j</td><td>0</td><td>llm-rubric</td><td>score</td>" in page


def test_the_calibration_page_pairs_imported_labels_with_the_runs_records(tmp_path: Path) -> None:
    from pytest_llmbench.results import MIN_LABELS

    imported = Review(ReviewKey("h1", "fake", 0, 0), answer_digest(JUDGED), "pass")  # no machine
    lost = Review(ReviewKey("h9", "fake", 0, 0), "other", "fail")
    append_review(tmp_path / "r" / REVIEWS_FILE, imported)
    append_review(tmp_path / "r" / REVIEWS_FILE, lost)
    with hand_client(tmp_path, JUDGED) as client:
        page = client.get("/calibration").text
    (row,) = re.findall(r'<tr class="group">(.*?)</tr>', page)
    assert row.startswith("<td>j</td><td>llm-rubric</td><td>c</td><td>1 ")
    assert f"too few labels (1 &lt; {MIN_LABELS})" in row
    assert "0 / 0 / 1 / 0" in row  # the judge failed what the person passed: a false negative
    assert 'id="unpaired">1 label keeps no machine verdict' in page


def test_a_label_keeps_the_machines_verdict_not_one_a_label_put_on_the_record(
    tmp_path: Path,
) -> None:
    # a run applied a label: outcome and passed are the person's, machine_* the machine's
    overridden = {**JUDGED, "outcome": "failed", "machine_outcome": "passed",
                  "verdict_source": "human",
                  "assertions": [{**JUDGED["assertions"][0], "passed": False,
                                  "machine_passed": True, "verdict_source": "human"}]}  # fmt: skip
    with hand_client(tmp_path, overridden) as client:
        for target in ("0", "item"):
            form = {"nodeid": JUDGED["nodeid"], "target": target, "label": "fail"}
            assert client.post("/run/0/r/label", data=form).status_code == 303
        page = client.get("/run/0/r/item", params={"nodeid": JUDGED["nodeid"]}).text
    lines = read_reviews(tmp_path / "r" / REVIEWS_FILE)
    assert [line.machine.passed if line.machine else None for line in lines] == [True, True]
    assert page.count("<i>machine: pass</i>") == 2 and 'data-agree="0"' in page


def test_the_judged_assertion_is_the_one_its_judges_name() -> None:
    # a conversation: turn checks first, the case's rubric last; the judge entry counts the
    # case's assertions (1), the verdicts name their own judges
    from pytest_llmbench.view.review import judged

    record = {
        "assertions": [
            {"type": "icontains", "passed": True, "turn": 1},
            {"type": "icontains", "passed": True, "turn": 2},
            {"type": "llm-rubric", "passed": False, "judges": ["j"], "criterion": "kind"},
        ],
        "judges": [{"assertion": 1, "judge": "j", "scores": {"score": 0.2}}],
    }
    for entry in record["assertions"][:2]:
        entry["judges"] = []
    assert judged(record) == [2]
