"""The review pages of `llmbench view`: the label panel of an item, the review queue, the
calibration of judges against people, and a broken labels file's message.

Forms are plain urlencoded POSTs that work without JavaScript; a little inline script adds the
keyboard (p, f, u, c, j/n, k, 0..9), off while typing in a comment. Every text from a record or
a label (a comment is user text) is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..report import text
from ..results import MIN_LABELS, Calibration, JudgeGroup, Labels, Review, machine_verdict
from .pages import layout, link
from .review import QueueFilter, QueueItem, eval_file_of, judge_verdict, judged, reviewable
from .runs import Run

Record = Mapping[str, Any]

REVIEW_STYLE = """
.review { border: 1px solid #dadce0; border-radius: 4px; padding: 0.5em 1em; margin: 0.8em 0; }
form.label { border-left: 4px solid transparent; padding: 0.3em 0.6em; margin: 0.4em 0; }
form.label.chosen { border-left-color: #1a73e8; background: #f1f6fe; }
form.label textarea { width: 30em; height: 2.4em; vertical-align: middle; }
.current { font-size: 0.9em; } .agree { color: #137333; } .disagree { color: #c5221f; }
.keys { color: #5f6368; font-size: 0.85em; } kbd { border: 1px solid #bbb; padding: 0 0.3em; }
.blind { background: #f1f3f4; padding: 0.4em; }
"""

#: The keyboard, inline: no CDN, no build. Off while typing in a text field.
_KEYS_JS = """
<script>
(function () {
  var forms = Array.prototype.slice.call(document.querySelectorAll("form.label"));
  var chosen = 0;
  function choose(i) {
    if (i < 0 || i >= forms.length) return;
    chosen = i;
    forms.forEach(function (f, j) { f.classList.toggle("chosen", j === i); });
    var folded = forms[i].closest("details");
    if (folded) folded.open = true;
  }
  choose(0);
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.key === "Escape" && t && t.tagName === "TEXTAREA") { t.blur(); return; }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (t && (t.tagName === "TEXTAREA" || t.tagName === "INPUT" || t.tagName === "SELECT")) return;
    var form = forms[chosen];
    var go = function (id) { var a = document.getElementById(id); if (a) location.href = a.href; };
    var label = {p: "pass", f: "fail", u: "unsure"}[e.key];
    if (label && form) {
      var b = form.querySelector('button[value="' + label + '"]');
      if (b && !b.disabled) { e.preventDefault(); b.click(); }
    } else if (e.key === "c" && form) {
      e.preventDefault(); form.querySelector("textarea").focus();
    } else if (e.key === "j" || e.key === "n") { go("next"); }
    else if (e.key === "k") { go("prev"); }
    else if (/^[0-9]$/.test(e.key)) { choose(parseInt(e.key, 10)); }
  });
})();
</script>
"""

_KEYS_HELP = (
    '<p class="keys" id="keys">Keys: <kbd>p</kbd> pass, <kbd>f</kbd> fail, <kbd>u</kbd> unsure '
    "(for the chosen line), <kbd>c</kbd> comment (<kbd>Esc</kbd> leaves it), <kbd>1</kbd>..<kbd>9"
    "</kbd> choose an assertion (the judged ones first), <kbd>0</kbd> the whole item, <kbd>j</kbd> or <kbd>n</kbd> "
    "next item, <kbd>k</kbd> previous item.</p>"
)


def labels_error(message: str) -> str:
    """A broken labels file, said plainly (``path:line: why``)."""
    return (
        f'<p class="bad" id="labels-error">The labels file cannot be read: {text(message)}. '
        "Fix or delete that line (it was edited by hand?): until then no label is applied and "
        "none is written here.</p>"
    )


#: A record's fields blind mode leaves out: the verdict, its figures, earlier attempts' (their
#: outcomes and errors), a label's (an effective verdict).
BLIND_HIDDEN = (
    "outcome", "passed", "score", "threshold", "dimensions", "metrics", "error", "error_kind",
    "attempts", "machine_outcome", "verdict_source", "review",
)  # fmt: skip


def blinded(record: Record) -> dict[str, Any]:
    """``record`` without anything of the machine's verdict (:data:`BLIND_HIDDEN`, assertions'
    verdicts, judges; blind mode, before the person has labelled it)."""
    shown = {key: value for key, value in record.items() if key not in BLIND_HIDDEN}
    shown["assertions"], shown["judges"] = [], []
    if shown.get("conversation_stopped") == "failed":  # a stop_on_fail check failed: a verdict
        shown["conversation_stopped"] = None
    if isinstance(record.get("conversation"), list):
        shown["conversation"] = [
            {k: v for k, v in entry.items() if k != "assertions"} if isinstance(entry, Mapping)
            else entry
            for entry in record["conversation"]
        ]  # fmt: skip
    return shown


def _verdict_word(passed: bool | None) -> str:
    return "pass" if passed else "fail" if passed is not None else "no verdict"


def _current(review: Review | None, machine: bool | None, reveal: bool) -> str:
    if review is None:
        return '<span class="current note">no label</span>'
    said = (
        f'<span class="current" data-label="{text(review.label)}">labelled <b>{text(review.label)}'
        f"</b> by {text(review.reviewer or '?')} at {text(review.at)}"
    )
    if review.comment:
        said += f": <q>{text(review.comment)}</q>"
    said += "</span>"
    if reveal and review.label in ("pass", "fail") and machine is not None:
        agree = (review.label == "pass") == machine
        word = "agree" if agree else "disagree"
        said += (
            f' <span class="{word}" data-agree="{int(agree)}">the machine said '
            f"{_verdict_word(machine)}: you {word}</span>"
        )
    return said


def _label_form(
    run: Run,
    record: Record,
    target: int | None,
    review: Review | None,
    *,
    number: int,
    hidden: Mapping[str, str],
    disabled: bool,
    reveal: bool,
    blind: bool,
) -> str:
    entries = record.get("assertions") or []
    if target is None:
        what = "the whole item"
        machine = machine_verdict(record, None).passed
    else:
        entry = entries[target] if isinstance(entries[target], Mapping) else {}
        criterion = entry.get("criterion") or ""  # the rubric: shown, blind or not
        what = f"assertion {target} ({entry.get('type')}"
        what = what if target in judged(record) else f"{what}, not judged"
        what += f": {str(criterion)[:80]})" if criterion else ")"
        machine = machine_verdict(record, target).passed
    fields = "".join(
        f'<input type="hidden" name="{text(k)}" value="{text(v)}">' for k, v in hidden.items()
    )
    off = " disabled" if disabled else ""
    buttons = "".join(
        f'<button type="submit" name="label" value="{value}"{off}>{value}</button> '
        for value in ("pass", "fail", "unsure")
    )
    clear = (
        f'<button type="submit" name="label" value="clear"{off}>clear</button>' if review else ""
    )
    known = "item" if target is None else str(target)
    verdict = "" if blind and not reveal else f" <i>machine: {_verdict_word(machine)}</i>"
    return (
        f'<form class="label" method="post" action="{text(link("/run/" + run.key + "/label"))}" '
        f'data-target="{known}"><b>{number}</b> {text(what)}{verdict}<br>'
        f'<input type="hidden" name="nodeid" value="{text(record.get("nodeid"))}">'
        f'<input type="hidden" name="target" value="{known}">{fields}{buttons}'
        f'<textarea name="comment" placeholder="comment (optional)"{off}></textarea>{clear}'
        f"<br>{_current(review, machine, reveal)}</form>"
    )


def review_panel(
    run: Run,
    record: Record,
    labels: Labels | None,
    *,
    error: str = "",
    chosen: QueueFilter | None = None,
    nav: Mapping[str, str] | None = None,
    left: tuple[int, int] | None = None,
) -> str:
    """The review panel of an item page: a form per target (the whole item, each judged
    assertion, then folded the other assertions), the label in force on each, the keys;
    ``labels`` None: the file is broken."""
    if not reviewable(record):
        return (
            '<section class="review" id="review"><p class="note" id="not-reviewable">This item '
            "called no model: there is no answer to label.</p></section>"
        )
    chosen = chosen or QueueFilter()
    hidden = {"queue": "1", **chosen.query()} if nav is not None else chosen.query()
    reveal = labels is not None and _labelled_here(record, labels)
    blind = chosen.blind
    judged_ones = judged(record)
    others = [i for i in range(len(record.get("assertions") or [])) if i not in judged_ones]
    targets: list[int | None] = [None, *judged_ones, *others]
    made = [
        _label_form(
            run, record, target, labels.for_record(record, target) if labels else None,
            number=number, hidden=hidden, disabled=labels is None, reveal=reveal, blind=blind,
        )
        for number, target in enumerate(targets)
    ]  # fmt: skip
    cut = 1 + len(judged_ones)
    forms = "".join(made[:cut])
    if made[cut:]:
        forms += (
            '<details class="others"><summary>the other assertions (not judged)</summary>'
            f"{''.join(made[cut:])}</details>"
        )
    links = ""
    if nav is not None:
        parts = [f'<a id="{name}" href="{text(url)}">{name}</a>' for name, url in nav.items()]
        count = f'<span id="left">{left[0]} of {left[1]} left</span> ' if left else ""
        links = f'<p class="queue-nav">{count}{" ".join(parts)}</p>'
    mode = ""
    if blind and not reveal:
        mode = '<p class="blind" id="blind">Blind: the judges\' verdicts are hidden until you label.</p>'
    return (
        f'<style>{REVIEW_STYLE}</style><section class="review" id="review"><h2>Review</h2>{labels_error(error) if error else ""}'
        f"{mode}{links}{forms}{_KEYS_HELP}</section>{_KEYS_JS}"
    )


def _labelled_here(record: Record, labels: Labels) -> bool:
    return any(labels.for_record(record, t) is not None for t in [None, *judged(record)])


def is_revealed(record: Record, labels: Labels | None) -> bool:
    """Blind mode shows the machine's verdict once the item has a label."""
    return labels is not None and _labelled_here(record, labels)


# -- the queue ----------------------------------------------------------------------------------
def queue_page(
    scope: str,
    items: Sequence[QueueItem],
    total: int,
    chosen: QueueFilter,
    choices: Sequence[tuple[Run, Record]],
    error: str = "",
) -> str:
    """The review queue: its filters, "n of N left", and the items it walks."""
    models = sorted({str(r.get("model")) for _, r in choices if r.get("model")})
    files = sorted({eval_file_of(r) for _, r in choices})
    left = sum(1 for item in items if not item.labelled)

    def select(name: str, options: Mapping[str, str], value: str) -> str:
        shown = "".join(
            f'<option value="{text(k)}"{" selected" if k == value else ""}>{text(v)}</option>'
            for k, v in options.items()
        )
        return f'<select name="{name}">{shown}</select>'

    def box(name: str, label: str, on: bool) -> str:
        checked = " checked" if on else ""
        return f'<label><input type="checkbox" name="{name}" value="1"{checked}> {label}</label>'

    form = (
        f'<form class="filters" method="get" action="{text(scope)}">'
        + (f'<input type="hidden" name="run" value="{text(chosen.run)}">' if chosen.run else "")
        + select("model", {"": "every model", **{m: m for m in models}}, chosen.model)
        + select("eval_file", {"": "every eval file", **{f: f for f in files}}, chosen.eval_file)
        + select(
            "verdict",
            {"": "judges passed or failed", "passed": "judges passed", "failed": "judges failed"},
            chosen.verdict,
        )
        + box("disagreement", "disagreement", chosen.disagreement)
        + box("labelled", "include labelled", chosen.include_labelled)
        + box("blind", "blind", chosen.blind)
        + '<button type="submit">apply</button></form>'
    )
    first = next((item for item in items if not item.labelled), None)
    start = (
        f'<p><a id="start" href="{text(item_link(first, chosen))}">review the next item</a></p>'
        if first
        else '<p id="done" class="note">Nothing left to review with these filters.</p>'
    )
    rows = "".join(
        f'<tr data-nodeid="{text(item.record.get("nodeid"))}"><td>{text(item.run.key)}</td>'
        f'<td><a href="{text(item_link(item, chosen))}">{text(item.record.get("nodeid"))}</a></td>'
        f"<td>{text(item.record.get('model'))}</td><td>{_judges_cell(item.record, chosen)}</td>"
        f"<td>{'labelled' if item.labelled else ''}</td></tr>"
        for item in items
    )
    note = (
        '<p class="note">Judged items (an assertion decided by judges) without a label. '
        "Disagreement: the judges of one assertion fall on both sides of its pass line (mean "
        "score 0.5 of 1), or a label on the same case and model (this item's, another repeat's or answer's) says "
        "otherwise than the machine.</p>"
    )
    body = (
        f"<style>{REVIEW_STYLE}</style>{labels_error(error) if error else ''}{note}{form}"
        f'<p id="left">{left} of {total} left</p>{start}'
        '<table class="queue" id="queue"><tr><th>run</th><th>item</th><th>model</th>'
        f"<th>judges</th><th></th></tr>{rows}</table>"
    )
    return layout("Review queue", body)


def _judges_cell(record: Record, chosen: QueueFilter) -> str:
    if chosen.blind:
        return "hidden"
    return _verdict_word(judge_verdict(record))


def item_link(item: QueueItem, chosen: QueueFilter) -> str:
    """An item's page within the queue (its filters kept)."""
    path = "/run/" + item.run.key + "/item"
    return link(path, nodeid=item.record.get("nodeid"), queue="1", **chosen.query())


# -- calibration --------------------------------------------------------------------------------
def _ci(pair: tuple[float, float] | None) -> str:
    return f" [{pair[0]:.2f}, {pair[1]:.2f}]" if pair else ""


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def calibration_page(
    calibrations: Mapping[JudgeGroup, Calibration],
    labels: int,
    error: str = "",
    *,
    unpaired: int = 0,
) -> str:
    """Each judge group's agreement with people, "too few labels" marked (fewer than
    results' ``MIN_LABELS``, the run's and ``llmbench calibrate``'s mark); ``unpaired``: labels
    that keep no machine verdict and match no record of the runs shown."""
    rows = []
    for group, c in calibrations.items():
        few = (
            f'<span class="bad few">too few labels ({c.n} &lt; {MIN_LABELS})</span>'
            if c.n < MIN_LABELS
            else ""
        )
        cells = c.confusion
        rows.append(
            f'<tr class="group"><td>{text("+".join(group.judges))}</td><td>{text(group.type)}</td>'
            f"<td>{text(group.criterion or '')}</td><td>{c.n} {few}</td>"
            f"<td>{_number(c.kappa)}{_ci(c.kappa_ci)}</td><td>{_number(c.tpr)}{_ci(c.tpr_ci)}</td>"
            f"<td>{_number(c.fpr)}{_ci(c.fpr_ci)}</td>"
            f"<td>{cells.tp} / {cells.fp} / {cells.fn} / {cells.tn}</td>"
            f"<td>{text(c.leaning)}</td><td>{c.unsure}</td></tr>"
        )
    table = (
        '<table class="calibration" id="calibration"><tr><th>judges</th><th>type</th>'
        "<th>criterion</th><th>n</th><th>kappa [95% CI]</th><th>TPR [CI]</th><th>FPR [CI]</th>"
        "<th>TP / FP / FN / TN</th><th>leaning</th><th>unsure</th></tr>"
        f"{''.join(rows)}</table>"
        if rows
        else '<p class="note" id="no-labels">No labels on judged verdicts yet: label items in '
        'the <a href="/review">review queue</a>.</p>'
    )
    body = (
        f"{labels_error(error) if error else ''}"
        f'<p class="note">{labels} label{"" if labels == 1 else "s"} in force over every run shown and the shared labels '
        "folder. Pass is positive: TPR is the share of answers people passed that the judges "
        "passed, FPR the share people failed that they passed; FP: the judges passed what the "
        f"person failed. Fewer than {MIN_LABELS} labels: too few to trust.</p>"
        + (
            f'<p class="note" id="unpaired">{unpaired} '
            f"{'label keeps' if unpaired == 1 else 'labels keep'} "
            "no machine verdict and match no record of the runs shown (same key and "
            "answer, or node id): not calibrated.</p>"
            if unpaired
            else ""
        )
        + table
    )
    return layout("Judges against people", body)
