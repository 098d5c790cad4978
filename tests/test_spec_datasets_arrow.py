"""Tests for pytest_llmbench.spec.datasets on parquet files and Hugging Face save_to_disk folders.

The fixtures are written by the real ``datasets`` library (a dev dependency), so the loader is
checked against the layouts it actually produces; the package itself reads them with pyarrow.
"""

from __future__ import annotations

import base64
import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
hf = pytest.importorskip("datasets")
hf.disable_progress_bars()

from pytest_llmbench.spec.datasets import (  # noqa: E402  (after the offline switch)
    DatasetError,
    DatasetRow,
    DatasetSource,
    load_dataset,
)

# A 1x1 PNG, and the leading bytes of a JPEG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(16)

HELLASWAG: dict[str, list[Any]] = {
    "ind": [4, 8, 15],
    "ctx": ["A man sits on a roof. He", "A woman holds a cat. She", "Kids play ball. They"],
    "endings": [
        ["starts pulling up roofing.", "is ripping tiles.", "eats lunch.", "flies away."],
        ["pets it.", "throws it.", "eats it.", "paints it."],
        ["kick it.", "sell it.", "cook it.", "fold it."],
    ],
    "label": ["3", "0", ""],  # HellaSwag labels are strings; the test split leaves them empty
}
PIQA = {
    "goal": ["Open a jar", "Dry a phone"],
    "sol1": ["Twist the lid.", "Put it in rice."],
    "sol2": ["Hit it with a hammer.", "Microwave it."],
    "label": [0, 0],
}
WINOGRANDE = {
    "sentence": [
        "Ian asked Dennis for help because _ was stuck.",
        "The cup fit in the bag as _ was small.",
    ],
    "option1": ["Ian", "cup"],
    "option2": ["Dennis", "bag"],
    "answer": ["1", "1"],
}
ARC = {
    "id": ["Mercury_7175875", "NYSEDREGENTS_2015_4_8"],
    "question": ["Which is a planet?", "What melts ice?"],
    "choices": [
        {"text": ["Sun", "Mars", "Moon"], "label": ["A", "B", "C"]},
        {"text": ["heat", "cold", "dark", "wind"], "label": ["1", "2", "3", "4"]},
    ],
    "answerKey": ["B", "1"],
}


def load(base: Path, **source: Any) -> list[DatasetRow]:
    return load_dataset(DatasetSource(**source), base)


def load_error(base: Path, **source: Any) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load(base, **source)
    return info.value


# --- multiple-choice benchmark shapes ---------------------------------------------------------


def test_hellaswag_parquet_list_choices_and_string_labels(tmp_path: Path) -> None:
    hf.Dataset.from_dict(HELLASWAG).to_parquet(str(tmp_path / "hellaswag.parquet"))
    rows = load(tmp_path, path="hellaswag.parquet", prompt="ctx", choices="endings", answer="label")
    first = rows[0]
    assert first.prompt == "A man sits on a roof. He"
    assert first.choices == tuple(HELLASWAG["endings"][0]) and first.choice_labels is None
    assert first.answer == "3" and first.expected is None
    assert rows[1].answer == "0" and rows[2].answer is None  # an empty label: unknown
    assert first.vars["endings"] == HELLASWAG["endings"][0]  # list columns stay lists
    assert first.vars["ind"] == 4  # numbers stay numbers
    assert (first.line, first.number, first.where) == (None, 1, "row 1")
    assert [r.id for r in rows] == ["row-1", "row-2", "row-3"]


def test_piqa_parquet_folder_splits_and_choice_columns(tmp_path: Path) -> None:
    folder = tmp_path / "piqa"
    folder.mkdir()
    hf.Dataset.from_dict(PIQA).to_parquet(str(folder / "validation.parquet"))
    train = {key: values[:1] for key, values in PIQA.items()}
    hf.Dataset.from_dict(train).to_parquet(str(folder / "train.parquet"))
    mapping = {"path": "piqa", "prompt": "goal", "choices": ["sol1", "sol2"], "answer": "label"}

    error = load_error(tmp_path, **mapping)
    assert str(error) == f"{folder}: dataset.split: choose one of train, validation"
    rows = load(tmp_path, **mapping, split="validation")
    assert [r.choices for r in rows] == [
        ("Twist the lid.", "Hit it with a hammer."),
        ("Put it in rice.", "Microwave it."),
    ]
    assert [r.answer for r in rows] == [0, 0]
    assert len(load(tmp_path, **mapping, split="train")) == 1


def test_winogrande_hub_layout_answer_is_the_default_answer_column(tmp_path: Path) -> None:
    data = tmp_path / "winogrande" / "data"
    data.mkdir(parents=True)
    hf.Dataset.from_dict(WINOGRANDE).to_parquet(str(data / "validation-00000-of-00001.parquet"))
    hf.Dataset.from_dict(WINOGRANDE).to_parquet(str(data / "train-00000-of-00002.parquet"))
    hf.Dataset.from_dict(WINOGRANDE).to_parquet(str(data / "train-00001-of-00002.parquet"))
    mapping = {"path": "winogrande", "prompt": "sentence", "choices": ["option1", "option2"]}

    rows = load(tmp_path, **mapping, split="validation")
    assert [(r.choices, r.answer, r.expected) for r in rows] == [
        (("Ian", "Dennis"), "1", None),
        (("cup", "bag"), "1", None),
    ]
    assert len(load(tmp_path, **mapping, split="train")) == 4  # both shards, in order
    assert "choose one of train, validation" in str(load_error(tmp_path, **mapping))


def test_arc_dataset_dict_struct_choices_with_labels(tmp_path: Path) -> None:
    arc = hf.Dataset.from_dict(ARC)
    train = hf.Dataset.from_dict({key: values[:1] for key, values in ARC.items()})
    hf.DatasetDict({"train": train, "test": arc}).save_to_disk(str(tmp_path / "arc"))

    # `question`, `choices` and `answerKey` are default columns: ARC loads as it is.
    rows = load(tmp_path, path="arc", split="test")
    assert rows == load(tmp_path, path="arc", split="test", answer="answerKey")
    assert [r.id for r in rows] == ["Mercury_7175875", "NYSEDREGENTS_2015_4_8"]
    assert rows[0].prompt == "Which is a planet?"
    assert rows[0].choices == ("Sun", "Mars", "Moon")
    assert rows[0].choice_labels == ("A", "B", "C") and rows[0].answer == "B"
    assert rows[1].choice_labels == ("1", "2", "3", "4") and rows[1].answer == "1"
    assert rows[0].vars["choices"] == ARC["choices"][0]
    error = load_error(tmp_path, path="arc", split="validation", answer="answerKey")
    assert "split 'validation' not found; choose one of train, test" in str(error)
    assert "dataset.split: choose one of train, test" in str(load_error(tmp_path, path="arc"))


def test_single_saved_dataset_folder(tmp_path: Path) -> None:
    hf.Dataset.from_dict({"question": ["q1", "q2"], "answer": [41, 42]}).save_to_disk(
        str(tmp_path / "one")
    )
    rows = load(tmp_path, path="one")
    assert [(r.prompt, r.expected) for r in rows] == [("q1", "41"), ("q2", "42")]
    assert rows[1].vars["answer"] == 42
    assert len(load(tmp_path, path="one", format="hf")) == 2
    error = load_error(tmp_path, path="one", split="test")
    assert "split 'test' not found: this dataset has no named splits" in str(error)


def test_many_arrow_shards_read_in_order(tmp_path: Path) -> None:
    data = hf.Dataset.from_dict({"prompt": [f"p{n}" for n in range(30)]})
    data.save_to_disk(str(tmp_path / "shards"), num_shards=3)
    assert len(list((tmp_path / "shards").glob("data-*.arrow"))) == 3
    rows = load(tmp_path, path="shards")
    assert [r.prompt for r in rows] == [f"p{n}" for n in range(30)]
    assert rows[-1].id == "row-30"


# --- images -----------------------------------------------------------------------------------


def image_dataset(tmp_path: Path) -> Any:
    (tmp_path / "pics").mkdir(exist_ok=True)
    (tmp_path / "pics" / "dot.png").write_bytes(PNG)
    features = hf.Features({"question": hf.Value("string"), "image": hf.Image()})
    rows = {
        "question": ["What colour?", "What shape?"],
        "image": [{"bytes": None, "path": "pics/dot.png"}, {"bytes": JPEG, "path": None}],
    }
    return hf.Dataset.from_dict(rows).cast(features)


def test_image_feature_saved_to_disk_becomes_data_urls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # save_to_disk embeds the bytes of (relative) image paths
    image_dataset(tmp_path).save_to_disk(str(tmp_path / "vqa"))
    rows = load(tmp_path, path="vqa")
    png_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert rows[0].images == (png_url,)
    assert rows[1].images[0].startswith("data:image/jpeg;base64,/9j/")
    assert rows[0].vars["image"] == [png_url]  # the refs, not the struct with bytes


def test_image_paths_in_parquet_are_relative_to_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # to_parquet looks at the image files (and keeps their paths)
    image_dataset(tmp_path).to_parquet(str(tmp_path / "vqa.parquet"))  # keeps the path only
    rows = load(tmp_path.parent, path=f"{tmp_path.name}/vqa.parquet", images="image")
    assert rows[0].images == (str(tmp_path / "pics" / "dot.png"),)
    assert rows[1].images[0].startswith("data:image/jpeg;base64,")


def test_image_list_column_of_paths_and_urls(tmp_path: Path) -> None:
    pics = [["a.png", "https://example.com/b.jpg"], []]
    hf.Dataset.from_dict({"prompt": ["x", "y"], "pics": pics}).to_parquet(
        str(tmp_path / "i.parquet")
    )
    rows = load(tmp_path, path="i.parquet", images="pics")
    assert rows[0].images == (str(tmp_path / "a.png"), "https://example.com/b.jpg")
    assert rows[1].images == ()


def test_image_bytes_of_unknown_kind_name_the_row(tmp_path: Path) -> None:
    image = [
        {"bytes": PNG, "path": None},
        {"bytes": b"GIF89a...", "path": None},
        {"bytes": b"%PDF", "path": None},
    ]
    hf.Dataset.from_dict({"prompt": ["a", "b", "c"], "image": image}).to_parquet(
        str(tmp_path / "x.parquet")
    )
    error = load_error(tmp_path, path="x.parquet")
    assert str(error) == (
        f"{tmp_path / 'x.parquet'}: row 3: image bytes are not a png, jpeg, gif or webp image"
    )
    assert error.line is None
    rows = load(tmp_path, path="x.parquet", limit=2)
    assert rows[1].images[0].startswith("data:image/gif;base64,")


# --- shuffle and limit ------------------------------------------------------------------------


def test_shuffle_is_a_seeded_permutation_before_limit(tmp_path: Path) -> None:
    hf.Dataset.from_dict({"prompt": [f"p{n}" for n in range(1, 21)]}).to_parquet(
        str(tmp_path / "s.parquet")
    )
    order = list(range(1, 21))
    random.Random(7).shuffle(order)
    rows = load(tmp_path, path="s.parquet", shuffle=True, seed=7, limit=5)
    assert [r.number for r in rows] == order[:5]
    assert all(r.id == f"row-{r.number}" and r.prompt == f"p{r.number}" for r in rows)
    again = load(tmp_path, path="s.parquet", shuffle=True, seed=7, limit=5)
    assert [r.id for r in again] == [r.id for r in rows]
    other = load(tmp_path, path="s.parquet", shuffle=True, seed=8, limit=5)
    assert [r.id for r in other] != [r.id for r in rows]
    plain = load(tmp_path, path="s.parquet", limit=5)
    assert [r.id for r in plain] == [f"row-{n}" for n in range(1, 6)]


def test_limit_reads_no_bad_row_beyond_it(tmp_path: Path) -> None:
    hf.Dataset.from_dict({"prompt": ["a", "b", ""]}).to_parquet(str(tmp_path / "l.parquet"))
    assert [r.prompt for r in load(tmp_path, path="l.parquet", limit=2)] == ["a", "b"]
    error = load_error(tmp_path, path="l.parquet")
    assert str(error).endswith("l.parquet: row 3: empty prompt in column 'prompt'")


# --- errors -----------------------------------------------------------------------------------


def test_missing_mapped_column_lists_the_available_ones(tmp_path: Path) -> None:
    hf.Dataset.from_dict(PIQA).to_parquet(str(tmp_path / "p.parquet"))
    error = load_error(tmp_path, path="p.parquet", prompt="question")
    assert str(error) == (
        f"{tmp_path / 'p.parquet'}: row 1: column 'question' (dataset.prompt) not found; "
        "available: 'goal', 'sol1', 'sol2', 'label'"
    )
    error = load_error(tmp_path, path="p.parquet", prompt="goal", choices=["sol1", "sol3"])
    assert "column 'sol3' (dataset.choices) not found" in str(error)


def test_duplicate_ids_name_rows(tmp_path: Path) -> None:
    hf.Dataset.from_dict({"id": ["a", "b", "a"], "prompt": ["x", "y", "z"]}).to_parquet(
        str(tmp_path / "d.parquet")
    )
    error = load_error(tmp_path, path="d.parquet")
    assert "duplicate case id 'a' at rows 1 and 3" in str(error) and error.line is None


def test_corrupt_parquet_and_arrow_files(tmp_path: Path) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"not a parquet file at all")
    error = load_error(tmp_path, path="bad.parquet")
    assert str(error).startswith(f"{tmp_path / 'bad.parquet'}: cannot read parquet file: ")
    assert "\n" not in str(error)

    hf.Dataset.from_dict({"prompt": ["a"]}).save_to_disk(str(tmp_path / "saved"))
    (tmp_path / "saved" / "data-00000-of-00001.arrow").write_bytes(b"garbage")
    error = load_error(tmp_path, path="saved")
    assert "data-00000-of-00001.arrow: cannot read Arrow file: " in str(error)


@pytest.mark.parametrize(
    ("files", "source", "message"),
    [
        ({"notes.txt": "hi"}, {}, "folder is neither a Hugging Face save_to_disk folder"),
        ({"notes.txt": "hi"}, {"format": "parquet"}, "no parquet files in the folder"),
        ({"notes.txt": "hi"}, {"format": "hf"}, "state.json not found"),
        ({"state.json": "[1]"}, {}, "state.json is not a JSON object"),
        ({"state.json": "{}"}, {}, "state.json lists no _data_files"),
        ({"dataset_dict.json": '{"splits": 3}'}, {}, "dataset_dict.json has no list of splits"),
        ({"x.csv": "prompt\na\n"}, {"format": "csv"}, "format csv needs a file, not a folder"),
    ],
)
def test_folder_errors(
    tmp_path: Path, files: dict[str, str], source: dict[str, Any], message: str
) -> None:
    folder = tmp_path / "ds"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    error = load_error(tmp_path, path="ds", **source)
    assert message in str(error) and str(error).startswith(str(folder))


def test_split_on_a_single_file_and_hf_format_on_a_file(tmp_path: Path) -> None:
    hf.Dataset.from_dict({"prompt": ["a"]}).to_parquet(str(tmp_path / "one.parquet"))
    error = load_error(tmp_path, path="one.parquet", split="train")
    assert "dataset.split needs a folder with splits, not a single file" in str(error)
    error = load_error(tmp_path, path="one.parquet", format="hf")
    assert "format hf needs a save_to_disk folder, not a file" in str(error)


def test_without_pyarrow_a_parquet_dataset_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyarrow is the `datasets` extra: without it, a parquet file is a clear dataset error."""
    hf.Dataset.from_dict(PIQA).to_parquet(str(tmp_path / "piqa.parquet"))
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    error = load_error(tmp_path, path="piqa.parquet", prompt="goal")
    assert "parquet datasets need pyarrow: pip install 'pytest-llmbench[datasets]'" in str(error)
    assert str(error).startswith(str(tmp_path / "piqa.parquet"))
