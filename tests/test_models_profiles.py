from __future__ import annotations

import ast
import inspect
import itertools
import re
import textwrap
from pathlib import Path

import pytest
from conftest import FAKE_KEY_ENV, FRANCE, Bench, Rule

from pytest_llmbench.models.profile_files import load_profiles
from pytest_llmbench.models.profiles import (
    BUILTIN_PROFILES,
    CostPer1k,
    ModelProfile,
    ProfileError,
    ProfileRegistry,
    api_key_missing,
)

REPO = Path(__file__).resolve().parents[1]
EVAL360 = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "360-eval"

FULL_PROFILE = """\
models:
  gpt-4o-mini:
    model: openai/gpt-4o-mini
    display_name: GPT-4o mini
    api_base: https://proxy.example/v1
    api_key_env: OPENAI_API_KEY
    params: {temperature: 0, max_tokens: 64}
    cost_per_1k: {input: 0.00015, output: 0.0006}
    tags: {tier: standard, region: us}
    rpm: 500
    litellm: {aws_region_name: us-west-2}
  claude-haiku:
    model: anthropic/claude-3-5-haiku-20241022
sets:
  frontier: [gpt-4o-mini, claude-haiku]
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def uncomment(text: str) -> str:
    """What a user gets by uncommenting examples.yaml: `# ` removed, `##` notes kept."""
    return "\n".join(
        line if line.startswith("##") else re.sub(r"^# ?", "", line) for line in text.splitlines()
    )


def test_builtin_local_smollm2() -> None:
    registry = load_profiles([])
    assert registry.get("local/smollm2") == ModelProfile(
        name="local/smollm2",
        model="openai/smollm2",
        display_name="SmolLM2-135M-Instruct (embedded)",
        embedded=True,
        parallel_safe=False,  # the embedded server answers one request at a time
        params={"temperature": 0},
        cost_per_1k=CostPer1k(input=0, output=0),
        tags={"provider": "local"},
        vision=False,  # SmolLM2 reads text only
    )
    assert registry.sets == {"local": ("local/smollm2",)}
    assert BUILTIN_PROFILES.name == "builtin.yaml"


def test_yaml_profile_all_fields(tmp_path: Path) -> None:
    registry = load_profiles([write(tmp_path, "p.yaml", FULL_PROFILE)])
    profile = registry.models["gpt-4o-mini"]
    assert profile.model_dump() == {
        "name": "gpt-4o-mini",
        "model": "openai/gpt-4o-mini",
        "display_name": "GPT-4o mini",
        "api_base": "https://proxy.example/v1",
        "api_key_env": "OPENAI_API_KEY",
        "embedded": False,
        "params": {"temperature": 0, "max_tokens": 64},
        "cost_per_1k": {
            "input": 0.00015,
            "output": 0.0006,
            # the optional parts' prices: the input, input and output price when not given
            "cached_input": None,
            "cache_write": None,
            "reasoning": None,
        },
        "cost_per_1k_batch": None,  # the map's batch prices, else half the live ones
        "tags": {"tier": "standard", "region": "us"},
        "rpm": 500,
        "tpm": None,
        "concurrency": None,
        "parallel_safe": True,
        "litellm": {"aws_region_name": "us-west-2"},
        "vision": None,  # unknown unless told
        "client": "auto",
        "effort": "auto",
        "batch": None,  # auto: batched under --batch where the provider has a batch API
        "thinking": None,  # the default rule
    }
    assert profile.label == "GPT-4o mini"
    assert registry.models["claude-haiku"].label == "claude-haiku"
    assert registry.sets["frontier"] == ("gpt-4o-mini", "claude-haiku")


def test_profiles_are_frozen() -> None:
    profile = ModelProfile(name="a", model="openai/a")
    with pytest.raises(ValueError, match="frozen"):
        profile.model = "openai/b"


def _field_docstrings(cls: type) -> dict[str, str]:
    """The docstring under each annotated field of ``cls``'s class body, from its source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    found: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        is_doc = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and is_doc:
            found[node.target.id] = str(after.value.value).strip()  # type: ignore[attr-defined]
    return found


def test_every_profile_field_is_documented() -> None:
    for model in (ModelProfile, CostPer1k):
        documented = _field_docstrings(model)
        undocumented = [name for name in model.model_fields if not documented.get(name)]
        assert undocumented == [], model.__name__
    assert "litellm model string" in _field_docstrings(ModelProfile)["model"]


@pytest.fixture
def eval360() -> Path:
    if not EVAL360.is_dir():
        pytest.skip(f"360-eval profile files not found at {EVAL360}")
    return EVAL360


def test_360_eval_jsonl_files_load_as_they_are(eval360: Path) -> None:
    registry = load_profiles([eval360 / "models_profiles.jsonl", eval360 / "judge_profiles.jsonl"])
    assert len(registry.sets["models_profiles"]) == 11
    assert len(registry.sets["judge_profiles"]) == 3
    assert len(registry.models) == 11 + 3 + 1  # and the builtin profile
    nova = registry.models["bedrock/us.amazon.nova-pro-v1:0"]
    assert nova.model == "bedrock/us.amazon.nova-pro-v1:0"
    assert nova.cost_per_1k == CostPer1k(input=0.0008, output=0.0032)
    assert nova.litellm == {"aws_region_name": "us-west-2"}
    assert nova.tags == {"region": "us-west-2"}
    assert nova.rpm == 60
    assert registry.models["bedrock/us.amazon.nova-micro-v1:0"].rpm is None
    judge = registry.models["bedrock/us.amazon.nova-premier-v1:0"]
    assert judge.cost_per_1k == CostPer1k(input=0.0025, output=0.0125)
    assert judge.litellm == {"aws_region_name": "us-east-2"}
    first_judge = "bedrock/us.anthropic.claude-sonnet-4-20250514-v1:0"
    assert registry.sets["judge_profiles"][0] == first_judge


def test_360_eval_directory_contributes_both_files(eval360: Path) -> None:
    registry = load_profiles([eval360])
    assert {"models_profiles", "judge_profiles"} <= set(registry.sets)
    assert [p.name for p in registry.resolve("@judge_profiles")] == list(
        registry.sets["judge_profiles"]
    )


def test_repo_profiles_folder(tmp_path: Path) -> None:
    registry = load_profiles([REPO / "profiles"])
    warm = registry.models["smollm2-warm"]
    assert warm.embedded and warm.api_base is None
    assert warm.params["temperature"] == 0.7
    assert warm.model == registry.models["local/smollm2"].model
    assert registry.sets["local-all"] == ("local/smollm2", "smollm2-warm")


def test_examples_yaml_loads_as_empty() -> None:
    examples = REPO / "profiles" / "examples.yaml"
    assert all(line.startswith("#") for line in examples.read_text().splitlines() if line)
    assert load_profiles([examples]) == load_profiles([])


def test_examples_yaml_uncommented_is_valid(tmp_path: Path) -> None:
    text = uncomment((REPO / "profiles" / "examples.yaml").read_text())
    registry = load_profiles([write(tmp_path, "examples.yaml", text)])
    models = {p.name: p.model.split("/")[0] for p in registry.models.values()}
    providers = {"openai", "anthropic", "bedrock", "gemini", "azure", "hosted_vllm"}
    assert providers <= set(models.values())
    assert registry.models["nova-lite"].litellm == {"aws_region_name": "us-west-2"}
    assert registry.models["azure-gpt-4o"].litellm["api_version"]
    assert registry.models["llama3.2-ollama"].api_base == "http://127.0.0.1:11434/v1"
    assert registry.models["gpt-4o-via-litellm"].client == "litellm"
    assert "local/smollm2" in registry.sets["self-hosted"]
    assert len(registry.resolve("@small")) == 4


@pytest.fixture
def registry(tmp_path: Path) -> ProfileRegistry:
    text = FULL_PROFILE + "  everything: ['@frontier', '@local', openai/gpt-4.1]\n"
    return load_profiles([write(tmp_path, "p.yaml", text)])


def test_resolve_names_raw_ids_and_sets(registry: ProfileRegistry) -> None:
    resolved = registry.resolve("gpt-4o-mini, openai/o3 ,@local")
    assert [p.name for p in resolved] == ["gpt-4o-mini", "openai/o3", "local/smollm2"]
    assert resolved[0] is registry.models["gpt-4o-mini"]
    assert resolved[1] == ModelProfile(name="openai/o3", model="openai/o3")


def test_resolve_nested_sets_and_raw_members(registry: ProfileRegistry) -> None:
    assert registry.sets["everything"] == (
        "gpt-4o-mini",
        "claude-haiku",
        "local/smollm2",
        "openai/gpt-4.1",
    )
    raw = registry.resolve("@everything")[-1]
    assert (raw.name, raw.model, raw.cost_per_1k) == ("openai/gpt-4.1", "openai/gpt-4.1", None)


def test_resolve_dedupes_first_wins_and_ignores_empty_entries(registry: ProfileRegistry) -> None:
    resolved = registry.resolve(",claude-haiku,,@frontier, claude-haiku,")
    assert [p.name for p in resolved] == ["claude-haiku", "gpt-4o-mini"]


def test_resolve_unknown_set_lists_known_sets(registry: ProfileRegistry) -> None:
    with pytest.raises(ProfileError) as info:
        registry.resolve("gpt-4o-mini,@nope")
    assert str(info.value) == (
        "unknown model set '@nope' (known sets: @everything, @frontier, @local)"
    )


@pytest.mark.parametrize("selection", ["", " , ,", "@empty"])
def test_resolve_empty_selection(selection: str) -> None:
    registry = ProfileRegistry(models={}, sets={"empty": ()})
    with pytest.raises(ProfileError, match="no models selected"):
        registry.resolve(selection)


def test_a_raw_id_that_is_no_text_is_a_profile_error() -> None:
    """Undecodable bytes on the command line become lone surrogates: `--judges=<them>` was an
    INTERNALERROR (pydantic's string_unicode error), found by the fuzzer."""
    with pytest.raises(ProfileError, match=r"^'\\udced' is no profile and no model id: "):
        load_profiles([]).resolve("openai/gpt-4o,\udced")


def test_user_profiles_override_builtin_and_later_files_win(tmp_path: Path) -> None:
    first = write(tmp_path, "a.yaml", "models:\n  local/smollm2: {model: openai/other}\n")
    second = write(tmp_path, "b.yaml", "models:\n  x: {model: m/first}\nsets: {local: [x]}\n")
    third = write(tmp_path, "c.yml", "models:\n  x: {model: m/second}\n")
    registry = load_profiles([first, second, third])
    assert registry.models["local/smollm2"].model == "openai/other"
    assert registry.models["x"].model == "m/second"
    assert registry.sets["local"] == ("x",)
    assert load_profiles([third, second]).models["x"].model == "m/first"


def test_directory_is_read_in_name_order(tmp_path: Path) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    write(folder, "b.yml", "models:\n  x: {model: m/b}\n")
    write(folder, "a.yaml", "models:\n  x: {model: m/a}\n  y: {model: m/y}\n")
    write(folder, "notes.txt", "not: [a profile")
    registry = load_profiles([folder])
    assert (registry.models["x"].model, registry.models["y"].model) == ("m/b", "m/y")


def test_missing_directory_is_ignored(tmp_path: Path) -> None:
    assert load_profiles([tmp_path / "no-such-dir"]) == load_profiles([])


def test_sets_are_expanded_after_all_files(tmp_path: Path) -> None:
    first = write(tmp_path, "a.yaml", "sets:\n  mine: ['@theirs', '@local']\n")
    second = write(tmp_path, "b.yaml", "sets:\n  theirs: [m/one, local/smollm2]\n")
    registry = load_profiles([first, second])
    assert registry.sets["mine"] == ("m/one", "local/smollm2")


BAD_YAML = [
    ("models:\n  a: {model: [x\n", 3, "invalid YAML"),
    ("models:\n  a:\n    model: m\n  b: {model: n\n", 5, "invalid YAML"),
    ("models:\n  a:\n    model: m\n    colour: blue\n", 4, "profile 'a': unknown key 'colour'"),
    ("models:\n  a:\n    model: m\n    rpm: lots\n", 4, "profile 'a': rpm: Input should be"),
    ("models:\n  a:\n    model: m\n    tags:\n      gen: 4\n", 5, "profile 'a': tags.gen: "),
    ("models:\n  ok: {model: m}\n  a:\n    display_name: A\n", 3, "missing required key 'model'"),
    ("models:\n  a:\n    model: m\n    cost_per_1k: {input: -1, output: 0}\n", 4, "input:"),
    (
        "models:\n  a:\n    model: m\n    cost_per_1k:\n      in: 1\n",
        5,
        "profile 'a': unknown key 'cost_per_1k.in'",
    ),
    ("models:\n  a:\n    model: m\n    cost_per_1k: {output: 1}\n", 4, "key 'cost_per_1k.input'"),
    ("models:\n  a:\n    model: m\n    name: b\n", 4, "unknown key 'name'"),
    ("models:\n  a:\n    model: m\n    api_key_env: sk-abc-123\n", 4, "api_key_env: String"),
    ("models:\n  a:\n    model: m\n    litellm: {api_key: x}\n", 4, "do not put 'api_key'"),
    (
        "models:\n  a:\n    model: m\n    litellm: {api_base: 'http://x.example/v1'}\n",
        4,
        "do not put 'api_base' in params or litellm; set the profile's api_base",
    ),
    ("models:\n  a:\n    model: m\n    params: {base_url: x}\n", 4, "do not put 'base_url'"),
    ("models:\n  ok: {model: m}\n  '@a,b': {model: m}\n", 3, "name: String should match"),
    ("models:\n  a: just-a-string\n", 2, "models.a: Input should be a valid dictionary"),
    ("model:\n  a: {model: m}\n", 1, "unknown key 'model' (known keys: models, sets)"),
    ("- a\n- b\n", 1, "expected a mapping with 'models' and/or 'sets'"),
    ("sets:\n  s: [a, b]\n  t:\n    - a\n    - {b: 1}\n", 5, "sets.t.1: Input should be a valid"),
    ("sets:\n  s: [a]\n  t: ['@t']\n", 3, "model set '@t' is cyclic: @t -> @t"),
    ("sets:\n  s: ['@t']\n  t: ['@u']\n  u: [x, '@t']\n", 4, "cyclic: @t -> @u -> @t"),
    ("sets:\n  s: [a]\n  t: [b, '@nope']\n", 3, "'@nope' (known sets: @local, @s, @t)"),
    (
        "models:\n  a:\n    model: m\n    params: &p {max_tokens: 5, self: *p}\n",
        4,
        "invalid YAML: recursive alias: *p is inside the value &p names",
    ),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD_YAML, ids=[m for *_, m in BAD_YAML])
def test_yaml_errors_name_path_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ProfileError) as info:
        load_profiles([path])
    assert (info.value.path, info.value.line) == (path, line)
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert message in str(info.value)


BAD_JSONL = [
    ('{"model_id": "a"}\n\n{"model_id": "b",}\n', 3, "invalid JSON"),
    ('{"model_id": "a"}\n["model_id", "b"]\n', 2, "expected a JSON object, got list"),
    ('{"model_id": "a", "regoin": "us"}\n', 1, "unknown key 'regoin' (known keys: model_id, "),
    ('{"region": "us-west-2"}\n', 1, "missing required key 'model_id'"),
    ('\n{"model_id": "a", "target_rpm": "fast"}\n', 2, "target_rpm: Input should be"),
    ('{"model_id": "a", "input_token_cost": 0.1}\n', 1, "cost_per_1k.output: Input should be"),
    ('{"model_id": "a", "input_cost_per_1k": -1, "output_cost_per_1k": 1}\n', 1, "input:"),
    ('{"model_id": "a", "x": ' + "[" * 100 + "]" * 100 + "}\n", 1, "nested more than 64 levels"),
    ('{"model_id": "a", "x": ' + "[" * 10**5 + "]" * 10**5 + "}\n", 1, "nested more than 64"),
    ('{"model_id": "a", "target_rpm": ' + "9" * 5000 + "}\n", 1, "Exceeds the limit (4300"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD_JSONL, ids=[m for *_, m in BAD_JSONL])
def test_jsonl_errors_name_path_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, "bad.jsonl", text)
    with pytest.raises(ProfileError) as info:
        load_profiles([path])
    assert (info.value.path, info.value.line) == (path, line)
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert message in str(info.value)


def test_file_errors_without_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ProfileError, match="cannot read profile file") as info:
        load_profiles([missing])
    assert (info.value.path, info.value.line) == (missing, None)
    assert str(info.value).startswith(f"{missing}: ")
    other = write(tmp_path, "profiles.json", "{}")
    with pytest.raises(ProfileError, match="not a profile file"):
        load_profiles([other])


def test_jsonl_set_named_after_stem_and_blank_lines(tmp_path: Path) -> None:
    text = '\n{"model_id": "m/a", "display_name": "A"}\n   \n{"model_id": "m/b"}\n\n'
    registry = load_profiles([write(tmp_path, "team.jsonl", text)])
    assert registry.sets["team"] == ("m/a", "m/b")
    assert registry.models["m/a"].label == "A"
    assert registry.models["m/b"].cost_per_1k is None and registry.models["m/b"].litellm == {}


def test_profile_error_str() -> None:
    assert str(ProfileError("boom", Path("p.yaml"), 3)) == "p.yaml:3: boom"
    assert str(ProfileError("boom", Path("p.yaml"))) == "p.yaml: boom"
    assert str(ProfileError("boom")) == "boom"
    assert ProfileError("boom", Path("p.yaml"), 3).args == ("boom", Path("p.yaml"), 3)


@pytest.mark.parametrize(
    ("api_key_env", "environ", "missing"),
    [
        (None, {}, None),
        ("OPENAI_API_KEY", {"OPENAI_API_KEY": "sk-x"}, None),
        ("OPENAI_API_KEY", {}, "OPENAI_API_KEY"),
        ("OPENAI_API_KEY", {"OPENAI_API_KEY": ""}, "OPENAI_API_KEY"),
        ("OPENAI_API_KEY", {"OPENAI_API_KEY": "  "}, "OPENAI_API_KEY"),
    ],
)
def test_api_key_missing(
    api_key_env: str | None, environ: dict[str, str], missing: str | None
) -> None:
    profile = ModelProfile(name="a", model="openai/a", api_key_env=api_key_env)
    assert api_key_missing(profile, environ) == missing


# --- vision ------------------------------------------------------------------------------------


def test_vision_flag(tmp_path: Path) -> None:
    text = "models:\n  eyes: {model: m/a, vision: true}\n  blind: {model: m/b, vision: no}\n"
    registry = load_profiles([write(tmp_path, "p.yaml", text)])
    assert (registry.models["eyes"].vision, registry.models["blind"].vision) == (True, False)
    bad = write(tmp_path, "bad.yaml", "models:\n  a:\n    model: m\n    vision: maybe\n")
    with pytest.raises(ProfileError, match=r"bad.yaml:4: profile 'a': vision: Input should be"):
        load_profiles([bad])


# --- deployment variants -----------------------------------------------------------------------

NOVA = """\
models:
  nova-pro:
    model: bedrock/us.amazon.nova-pro-v1:0
    display_name: Nova Pro
    params: {temperature: 0, max_tokens: 64}
    litellm: {aws_region_name: us-east-1}
    tags: {provider: aws}
    variants:
      priority: {litellm: {service_tier: priority}, tags: {tier: priority}}
      flex:
        litellm: {service_tier: flex}
        tags: {tier: flex}
        params: {reasoning_effort: low}
        rpm: 30
        cost_per_1k: {input: 0.0004, output: 0.0016}
        api_base: https://flex.example/v1
        display_name: Nova Pro (cheap)
  other: {model: m/other}
"""


def test_variants_become_profiles_merged_over_the_base(tmp_path: Path) -> None:
    registry = load_profiles([write(tmp_path, "p.yaml", NOVA)])
    assert "nova-pro" not in registry.models
    priority, flex = registry.models["nova-pro_priority"], registry.models["nova-pro_flex"]
    assert priority.model == flex.model == "bedrock/us.amazon.nova-pro-v1:0"
    assert priority.litellm == {"aws_region_name": "us-east-1", "service_tier": "priority"}
    assert priority.tags == {"provider": "aws", "tier": "priority", "variant": "priority"}
    assert priority.params == {"temperature": 0, "max_tokens": 64}
    assert (priority.rpm, priority.cost_per_1k, priority.api_base) == (None, None, None)
    assert priority.label == "Nova Pro (priority)"
    assert flex.litellm == {"aws_region_name": "us-east-1", "service_tier": "flex"}
    assert flex.params == {"temperature": 0, "max_tokens": 64, "reasoning_effort": "low"}
    assert flex.tags == {"provider": "aws", "tier": "flex", "variant": "flex"}
    assert (flex.rpm, flex.api_base, flex.label) == (
        30,
        "https://flex.example/v1",
        "Nova Pro (cheap)",
    )
    assert flex.cost_per_1k == CostPer1k(input=0.0004, output=0.0016)
    assert registry.sets["nova-pro"] == ("nova-pro_priority", "nova-pro_flex")
    assert registry.variant_groups == {"nova-pro"}


def test_variant_group_selected_by_plain_name_and_as_a_set(tmp_path: Path) -> None:
    text = NOVA + "sets:\n  mix: ['@nova-pro', other]\n"
    registry = load_profiles([write(tmp_path, "p.yaml", text)])
    both = ["nova-pro_priority", "nova-pro_flex"]
    assert [p.name for p in registry.resolve("nova-pro")] == both
    assert [p.name for p in registry.resolve("@nova-pro")] == both
    assert [p.name for p in registry.resolve("nova-pro_flex,nova-pro")] == both[::-1]
    assert [p.name for p in registry.resolve("@mix")] == [*both, "other"]


def test_variants_and_plain_profiles_override_each_other_by_file_order(tmp_path: Path) -> None:
    grouped = write(
        tmp_path, "a.yaml", "models:\n  local/smollm2:\n    model: m/x\n    variants: {a: {}}\n"
    )
    plain = write(tmp_path, "b.yaml", "models:\n  local/smollm2: {model: m/plain}\n")
    registry = load_profiles([grouped])
    assert "local/smollm2" not in registry.models  # the builtin profile gave way to the group
    assert [p.name for p in registry.resolve("local/smollm2")] == ["local/smollm2_a"]
    registry = load_profiles([grouped, plain])
    assert [p.model for p in registry.resolve("local/smollm2")] == ["m/plain"]
    assert registry.variant_groups == frozenset()


BAD_VARIANTS = [
    (
        "models:\n  a:\n    model: m\n    variants:\n      v:\n        colour: red\n",
        6,
        "profile 'a' variant 'v': unknown key 'colour' (known keys: model, ",
    ),
    ("models:\n  a:\n    model: m\n    variants: {}\n", 4, "'variants' must be a non-empty"),
    ("models:\n  a:\n    model: m\n    variants: [x]\n", 4, "'variants' must be a non-empty"),
    ("models:\n  a:\n    model: m\n    variants:\n      v: fast\n", 5, "expected a mapping"),
    (
        "models:\n  a_v: {model: m}\n  a:\n    model: m\n    variants:\n      v: {}\n",
        6,
        "profile 'a': variant 'v' makes profile 'a_v', which already exists",
    ),
    (
        "models:\n  a:\n    model: m\n    variants:\n      v: {}\n  a_v: {model: m}\n",
        5,
        "makes profile 'a_v', which already exists",
    ),
    (
        "models:\n  a:\n    model: m\n    variants:\n      v:\n        variants: {w: {}}\n",
        6,
        "variant 'v': unknown key 'variants'",
    ),
    ("models:\n  a:\n    model: m\n    variants:\n      v:\n        rpm: lots\n", 6, "rpm: Input"),
    (
        "models:\n  a:\n    model: m\n    tags:\n      gen: 4\n    variants:\n"
        "      v:\n        tags: {tier: x}\n",
        5,
        "profile 'a' variant 'v': tags.gen: ",
    ),
    (
        "models:\n  a:\n    rpm: 0\n    variants:\n      v: {model: m, rpm: 5}\n      w: {}\n",
        2,
        "missing required key 'model'",
    ),
    ("models:\n  a:\n    model: m\n    rpm: 0\n    variants:\n      v: {}\n", 4, "rpm: Input"),
    ("models:\n  a:\n    name: b\n    variants:\n      v: {}\n", 3, "unknown key 'name'"),
    (
        "models:\n  a:\n    model: m\n    variants:\n      v: {}\nsets:\n  a: [x]\n",
        4,
        "profile 'a': its variants make a model set 'a'; one exists",
    ),
    (
        "models:\n  a:\n    model: m\n    variants:\n      v:\n        litellm: {api_key: k}\n",
        6,
        "do not put 'api_key'",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "message"), BAD_VARIANTS, ids=[m for *_, m in BAD_VARIANTS]
)
def test_variant_errors_name_path_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ProfileError) as info:
        load_profiles([path])
    assert str(info.value).startswith(f"{path}:{line}: "), str(info.value)
    assert message in str(info.value)


def test_variant_litellm_params_reach_the_provider(bench: Bench) -> None:
    bench.pytester.makefile(
        ".yaml",
        **{
            "profiles/variants": f"""
models:
  tiered:
    model: openai/fake-model
    api_base: {bench.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
    params: {{temperature: 0}}
    variants:
      priority: {{litellm: {{service_tier: priority}}}}
      thinking: {{params: {{reasoning_effort: low}}, tags: {{tier: slow}}}}
"""
        },
    )
    bench.server.add_rule(Rule(reply="Paris."))
    bench.eval_file("capitals", FRANCE)
    result = bench.run("--models=tiered")
    result.assert_outcomes(passed=2)
    bodies = {
        request.body.get("service_tier", request.body.get("reasoning_effort")): request.body
        for request in bench.server.chat_requests()
    }
    assert set(bodies) == {"priority", "low"}
    assert "reasoning_effort" not in bodies["priority"]
    assert "service_tier" not in bodies["low"]
    assert all(body["temperature"] == 0 for body in bodies.values())
    records = {record["model"]: record for record in bench.records()}
    assert set(records) == {"tiered_priority", "tiered_thinking"}


# --- 360-eval files with one model in several regions ------------------------------------------


def test_jsonl_model_in_two_regions_becomes_two_profiles(tmp_path: Path) -> None:
    text = (
        '{"model_id": "m/a", "region": "us-west-2", "display_name": "A"}\n'
        '{"model_id": "m/b"}\n'
        '{"model_id": "m/a", "region": "eu-west-1", "target_rpm": 5}\n'
    )
    registry = load_profiles([write(tmp_path, "team.jsonl", text)])
    assert registry.sets["team"] == ("m/a_us-west-2", "m/b", "m/a_eu-west-1")
    west, europe = registry.models["m/a_us-west-2"], registry.models["m/a_eu-west-1"]
    assert west.model == europe.model == "m/a"
    assert west.litellm == {"aws_region_name": "us-west-2"} and west.label == "A (us-west-2)"
    assert europe.tags == {"region": "eu-west-1"} and europe.rpm == 5
    assert "m/a" not in registry.models
    # Its model_id selects every region, as a YAML profile's name selects its variants.
    assert [p.name for p in registry.resolve("m/a")] == ["m/a_us-west-2", "m/a_eu-west-1"]
    assert [p.name for p in registry.resolve("@m/a")] == ["m/a_us-west-2", "m/a_eu-west-1"]
    # A line without a region keeps the bare model_id beside the regional ones.
    text += '{"model_id": "m/a"}\n'
    registry = load_profiles([write(tmp_path, "team.jsonl", text)])
    assert registry.sets["team"][-1] == "m/a" and registry.models["m/a"].litellm == {}


@pytest.mark.parametrize(
    "text",
    [
        '{"model_id": "m/a", "region": "us"}\n{"model_id": "m/b"}\n{"model_id": "m/a", "region": "us"}\n',
        '{"model_id": "m/a"}\n\n{"model_id": "m/a", "target_rpm": 3}\n',
    ],
)
def test_jsonl_duplicate_model_and_region_is_an_error(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "dup.jsonl", text)
    with pytest.raises(ProfileError, match="model_id repeated with the same region") as info:
        load_profiles([path])
    assert (info.value.path, info.value.line) == (path, 3)


def test_a_litellm_id_that_a_profile_file_defines_is_announced(tmp_path: Path) -> None:
    # A 360-eval JSONL left in profiles/: --models=m/a selects its regions, not the bare id.
    text = (
        '{"model_id": "m/a", "region": "us-west-2", "target_rpm": 3}\n'
        '{"model_id": "m/a", "region": "eu-west-1", "target_rpm": 3}\n'
        '{"model_id": "m/b"}\n'
    )
    path = write(tmp_path, "team.jsonl", text)
    registry = load_profiles([path])
    (note,) = registry.shadowed_ids("m/a, openai/other, local/smollm2, team")
    assert note == (
        f"'m/a' is a profile of {path}, not the bare litellm id: 2 deployments; model m/a; "
        "rpm 3 (m/a_us-west-2, m/a_eu-west-1); rename or move that profile to call the id as is"
    )
    assert registry.shadowed_ids("m/b") == [
        f"'m/b' is a profile of {path}, not the bare litellm id: 1 profile; model m/b (m/b); "
        "rename or move that profile to call the id as is"
    ]
    # The built-in local/smollm2 is meant by its name; an id no file defines is called as is.
    assert registry.shadowed_ids("local/smollm2,openai/gpt-4o-mini") == []


def test_the_session_header_names_a_shadowed_id(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".jsonl", **{"profiles/team": '{"model_id": "m/a", "region": "us", "target_rpm": 3}\n'}
    )
    result = pytester.runpytest("--models=m/a", "--collect-only", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["llmbench: --models 'm/a' is a profile of *team.jsonl, not the bare litellm id: "
         "1 profile; model m/a; rpm 3 (m/a); rename*"]
    )  # fmt: skip


LOOPING_PROFILE = """\
models:
  loop:
    model: openai/fake-model
    params: &p {max_tokens: 5, self: *p}
"""


@pytest.mark.parametrize("where", ["profiles/", "--profiles"])
def test_a_profile_with_a_recursive_alias_is_a_usage_error_at_its_line(
    bench: Bench, where: str
) -> None:
    """It ended the run in an INTERNALERROR (RecursionError in redaction, then a circular
    reference in the results line); it is refused when the file is read, before any call."""
    name = "profiles/loop" if where == "profiles/" else "elsewhere/loop"
    bench.pytester.makefile(".yaml", **{name: LOOPING_PROFILE})
    bench.eval_file("one", "cases:\n  - {id: a, prompt: hi, expected: x, assert: [contains]}\n")
    args = ["--models=loop"] + ([] if where == "profiles/" else [f"--profiles={name}.yaml"])
    result = bench.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: llmbench: *{name}.yaml:4: invalid YAML: recursive alias: *p is inside the value &p*"
        ]
    )
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert bench.server.chat_requests() == []
