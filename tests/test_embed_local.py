"""The embedded default model and the user-model-directory provider, run for real (offline)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from codeloupe.embed import EmbeddingError, describe_provider, embedding_text, make_provider
from codeloupe.embed.background import embed_pending
from codeloupe.embed.local import (
    GRAPH_EDITS,
    MINILM_SHA256,
    REQUANTIZED,
    EncoderOptions,
    OnnxSentenceEncoder,
    derivation,
    distinct_words,
    file_sha256,
    is_known_derived,
    load_local_provider,
    local_model_id,
    minilm_tokenizer,
    recipe,
    remove_outdated_derivations,
    remove_stale_work_dirs,
    requantized_model,
    shipped_model_path,
    spread,
    verify_model,
)
from codeloupe.settings import Settings

REFERENCE = json.loads((Path(__file__).parent / "fixtures" / "embed" / "minilm_reference.json").read_text())


def frozen_for(model_id: str) -> np.ndarray:
    """The frozen vectors of a model id, made with the versions constraints.txt pins (the fixture names
    the recipe without the derivation versions, so a version change shows as drift, not a missing key)."""
    for requantized in (True, False):
        model_id = model_id.replace(f"-{derivation(requantized)}@", "@")
    return np.array(REFERENCE["frozen"][model_id], dtype=np.float32)


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="module")
def provider(model_cache: Path) -> OnnxSentenceEncoder:
    return make_provider(Settings(cache_dir=str(model_cache)))


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_default_provider_matches_its_frozen_output_and_the_float32_model(provider: OnnxSentenceEncoder) -> None:
    texts = [*REFERENCE["sentences"], REFERENCE["long_text"]]
    vectors = provider.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (len(texts), provider.dim) == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    frozen = frozen_for(provider.model_id)
    assert _cosines(vectors, frozen).min() > 0.999
    # The independent path: the original float32 weights through a numpy BERT (see make_reference.py), on
    # the sentences as written.
    whole = OnnxSentenceEncoder(provider.model_path, minilm_tokenizer(), model_id="whole text",
                                options=EncoderOptions(distinct_words=False))
    float32 = np.array(REFERENCE["float32"], dtype=np.float32)
    assert _cosines(whole.embed(REFERENCE["sentences"]), float32).min() > 0.98


def test_the_derived_graph_edits_keep_the_model_ids_vectors(provider: OnnxSentenceEncoder) -> None:
    # The frozen vectors predate the edits (NaN guards dropped, GELU fused) and the model id did not change
    # with them: an index embedded before must stay valid, so the vectors may move by rounding only.
    assert provider.model_path.name.startswith(f"all-MiniLM-L6-v2-{REQUANTIZED}-{GRAPH_EDITS}-")
    vectors = provider.embed([*REFERENCE["sentences"], REFERENCE["long_text"]])
    assert np.abs(vectors - frozen_for(provider.model_id)).max() < 1e-5


def test_the_unsigned_weight_form_gives_the_frozen_vectors_on_any_processor(provider: OnnxSentenceEncoder,
                                                                             tmp_path: Path) -> None:
    """Where onnxruntime's uint8 x int8 kernel saturates (x86 without VNNI) the derived file holds uint8
    weights. The integer products are the same, so that file's vectors are the frozen ones, here whatever
    this processor is (the uint8 x uint8 kernel is exact everywhere); the file in use is the form the kernel
    needs."""
    import onnx

    from codeloupe.embed import model_graph

    unsigned = tmp_path / "unsigned.onnx"
    shutil.copyfile(provider.model_path, unsigned)
    model_graph.unsigned_weights(unsigned)
    weights = {t.name: t.data_type for t in onnx.load(str(unsigned)).graph.initializer}
    matmuls = [n for n in onnx.load(str(unsigned)).graph.node if n.op_type == "MatMulInteger"]
    assert matmuls and all(weights[n.input[1]] == weights[n.input[3]] == onnx.TensorProto.UINT8 for n in matmuls)
    encoder = OnnxSentenceEncoder(unsigned, minilm_tokenizer(), model_id=provider.model_id,
                                  options=EncoderOptions(threads=1))
    vectors = encoder.embed([*REFERENCE["sentences"], REFERENCE["long_text"]])
    assert np.abs(vectors - frozen_for(provider.model_id)).max() < 1e-5
    in_use = {t.name: t.data_type for t in onnx.load(str(provider.model_path)).graph.initializer}
    expected = onnx.TensorProto.UINT8 if model_graph.int8_pairs_saturate() else onnx.TensorProto.INT8
    assert {in_use[n.input[1]] for n in matmuls} == {expected}
    assert (f"-{GRAPH_EDITS}-u8w-" in provider.model_path.name) == model_graph.int8_pairs_saturate()


def test_unsigned_weights_keep_every_integer_product(tmp_path: Path) -> None:
    """The edit on a bare MatMulInteger with per-channel int8 zero points and one without any: the uint8
    file computes the same int32 products (small values, so no kernel saturates either file)."""
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    from codeloupe.embed import model_graph

    rng = np.random.default_rng(5)
    weights = rng.integers(-127, 128, (6, 4)).astype(np.int8)
    zero_points = rng.integers(-3, 4, 4).astype(np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "w", "", "zw"], ["with_zero"]),
         helper.make_node("MatMulInteger", ["a", "w2"], ["without"])], "edit",
        [helper.make_tensor_value_info("a", onnx.TensorProto.UINT8, [1, 6])],
        [helper.make_tensor_value_info(name, onnx.TensorProto.INT32, [1, 4]) for name in ("with_zero", "without")],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(zero_points, "zw"),
         numpy_helper.from_array(weights, "w2")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), str(path))
    a = rng.integers(0, 16, (1, 6)).astype(np.uint8)
    expected = [a.astype(np.int64) @ (weights.astype(np.int64) - zero_points), a.astype(np.int64) @ weights]
    model_graph.unsigned_weights(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert {t.data_type for t in onnx.load(str(path)).graph.initializer} == {onnx.TensorProto.UINT8}
    for got, want in zip(session.run(None, {"a": a}), expected):
        assert got.tolist() == want.tolist()


def test_shipped_model_matches_the_float32_model_closely(model_cache: Path) -> None:
    shipped = load_local_provider(Settings(cache_dir=str(model_cache)), requantize=False,
                                  options=EncoderOptions(distinct_words=False))
    assert shipped.model_id == f"local:all-MiniLM-L6-v2-int8-{derivation(False)}@128x4-o16-solo-addln"
    float32 = np.array(REFERENCE["float32"], dtype=np.float32)
    assert _cosines(shipped.embed(REFERENCE["sentences"]), float32).min() > 0.999


def test_a_query_is_closer_to_its_code_than_to_unrelated_code(provider: OnnxSentenceEncoder) -> None:
    code = [
        embedding_text("auth.py > def verify_password(user, password)",
                       "def verify_password(user, password):\n    digest = hash_password(password, user.salt)\n"
                       "    return hmac.compare_digest(digest, user.password_hash)\n"),
        embedding_text("term.py > def progress_bar(items)",
                       "def progress_bar(items):\n    for i, item in enumerate(items):\n"
                       "        print(f'\\r[{\"#\" * i:<40}]', end='')\n        yield item\n"),
        embedding_text("db.py > def connect(url)",
                       "def connect(url):\n    return sqlite3.connect(url, timeout=30)\n"),
    ]
    vectors = provider.embed(code)
    for query, expected in (("check the user's password when logging in", 0),
                            ("show a progress bar in the terminal", 1),
                            ("open the database connection", 2)):
        scores = vectors @ provider.embed_query(query)
        assert int(np.argmax(scores)) == expected, (query, scores)


def test_a_long_texts_tail_shapes_its_vector(provider: OnnxSentenceEncoder) -> None:
    head = "def parse_arguments(argv):\n    options = {}\n" + "    options['x'] = argv.pop(0)\n" * 60
    tails = ["def send_email(smtp, message):\n    smtp.sendmail(message)\n" * 3,
             "def resize_image(pixels, width):\n    return scale(pixels, width)\n" * 3]
    vectors = provider.embed([head + tails[0], head + tails[1]])
    email = provider.embed_query("send an email over smtp")
    # Truncated to its first window, both texts would be identical; windowing keeps the tails apart.
    assert _cosines(vectors[:1], vectors[1:])[0] < 0.995
    assert vectors[0] @ email > vectors[1] @ email


def test_a_text_is_embedded_as_its_distinct_words_in_order_of_first_use() -> None:
    code = "def get(self, key):\n    return self._data.get(key, None)  # Get the KEY\n"
    assert distinct_words(code) == "def get self key return data None the"  # "Get", "KEY": seen
    assert distinct_words("__init__(x) -> 中文 naïve, parse_args") == "init x 中文 naïve parse args"
    assert distinct_words("  ;;; {} ") == ""


def test_the_text_form_is_part_of_the_model_id(model_cache: Path) -> None:
    """Vectors of the whole text and of the distinct words never share a model id (store and cache key)."""
    settings = Settings(cache_dir=str(model_cache))
    ids = {load_local_provider(settings, requantize=False, options=EncoderOptions(distinct_words=flag)).model_id
           for flag in (True, False)}
    assert len(ids) == 2 and any("-distinct-" in i for i in ids)
    # So do windows that overlap and windows that abut, and the session's graph fusions.
    assert recipe(EncoderOptions(overlap=0)) != recipe(EncoderOptions()) == "128x4-distinct-o16-solo-addln"


def test_window_selection_spreads_over_the_whole_text() -> None:
    assert spread(3, 8) == [0, 1, 2]
    assert spread(20, 8)[0] == 0 and spread(20, 8)[-1] == 19 and len(spread(20, 8)) == 8
    assert spread(20, 1) == [0]


def test_inputs_are_batched_by_length_under_the_token_budget(model_cache: Path) -> None:
    """Small and large token budgets give the same vectors (padding is masked out of the mean)."""
    texts = ["a", "def f(x):\n    return x\n" * 30, "class A:\n    pass\n", "b c d " * 40]
    small = load_local_provider(Settings(cache_dir=str(model_cache)), requantize=False,
                                options=EncoderOptions(batch_tokens=64))
    large = load_local_provider(Settings(cache_dir=str(model_cache)), requantize=False,
                                options=EncoderOptions(batch_tokens=100_000, sort_by_length=False))
    assert _cosines(small.embed(texts), large.embed(texts)).min() > 0.9999


def test_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it(provider: OnnxSentenceEncoder) -> None:
    # The model quantises each MatMul's input by the range of the whole tensor: run in one batch (with its
    # padding), these texts' vectors moved by up to 0.03 a component against each alone.
    texts = [*REFERENCE["sentences"], REFERENCE["long_text"]]
    together = provider.embed(texts)
    alone = np.concatenate([provider.embed([text]) for text in texts])
    assert np.abs(together - alone).max() < 1e-6


def test_the_batches_of_the_longest_windows_go_first(provider: OnnxSentenceEncoder) -> None:
    tokenizer = minilm_tokenizer()
    windows = [tokenizer.encode("word " * n) for n in (3, 100, 40, 7, 120, 60, 90, 110, 125, 20, 80)]
    longest = [max(len(windows[k].ids) for k in batch) for batch in provider._batches(windows)]
    assert len(longest) > 2 and longest == sorted(longest, reverse=True)
    assert sorted(k for batch in provider._batches(windows) for k in batch) == list(range(len(windows)))


def test_embed_query_is_cached_and_normalised(provider: OnnxSentenceEncoder) -> None:
    first = provider.embed_query("where are routes registered")
    again = provider.embed_query("where are routes registered")
    assert again is first and not first.flags.writeable
    assert first.shape == (provider.dim,) and abs(float(np.linalg.norm(first)) - 1.0) < 1e-5
    assert _cosines(first[None], provider.embed(["where are routes registered"]))[0] > 0.9999


def test_describe_provider_names_the_model_without_loading_it(provider: OnnxSentenceEncoder,
                                                               model_cache: Path) -> None:
    assert describe_provider(Settings(cache_dir=str(model_cache))) == ("local", provider.model_id)
    assert provider.model_id == local_model_id(Settings(cache_dir=str(model_cache)))


def test_provider_none_means_lexical_only(tmp_path: Path) -> None:
    settings = Settings(cache_dir=str(tmp_path), embed_provider="none")
    assert make_provider(settings) is None
    assert describe_provider(settings) == ("none", "")
    report = embed_pending(None, None, settings)  # type: ignore[arg-type]  # nothing is touched
    assert (report.chunks_done, report.computed, report.stopped) == (0, 0, False)


def test_unknown_provider_is_a_clear_error() -> None:
    with pytest.raises(EmbeddingError, match="unknown embed_provider 'bert'.*local, onnx, openai, none"):
        make_provider(Settings(embed_provider="bert"))


def test_a_damaged_model_file_is_refused_by_name(tmp_path: Path) -> None:
    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(b"not the model")
    with pytest.raises(EmbeddingError) as caught:
        verify_model(damaged, MINILM_SHA256, tmp_path / "cache")
    message = str(caught.value)
    assert str(damaged) in message and MINILM_SHA256 in message and "pip install" in message


def test_the_checksum_is_remembered_by_path_size_and_mtime(tmp_path: Path) -> None:
    file = tmp_path / "weights.bin"
    file.write_bytes(b"aaaa")
    first = file_sha256(file, tmp_path / "cache")
    stat = file.stat()
    file.write_bytes(b"bbbb")  # same size; restore the mtime: the remembered digest is used
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_sha256(file, tmp_path / "cache") == first
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert file_sha256(file, tmp_path / "cache") != first


def test_a_failed_requantisation_falls_back_to_the_shipped_model_for_good(tmp_path: Path) -> None:
    settings = Settings(cache_dir=str(tmp_path))
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x00" * 64)
    assert requantized_model(broken, MINILM_SHA256, settings.cache_root) is None
    provider = make_provider(settings)
    assert provider.model_id == f"local:all-MiniLM-L6-v2-int8-{derivation(False)}@128x4-distinct-o16-solo-addln"
    assert describe_provider(settings) == ("local", provider.model_id)
    assert provider.model_path == shipped_model_path()


def _onnx_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "my-model"
    folder.mkdir()
    shutil.copyfile(shipped_model_path(), folder / "model.onnx")
    tokenizer = minilm_tokenizer()
    tokenizer.enable_truncation(128)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def test_a_user_onnx_model_directory_embeds_like_the_same_model(tmp_path: Path, model_cache: Path) -> None:
    folder = _onnx_dir(tmp_path)
    settings = Settings(cache_dir=str(model_cache), embed_provider="onnx", onnx_model_dir=str(folder))
    user = make_provider(settings)
    name, model_id = describe_provider(settings)
    assert (name, model_id) == ("onnx", user.model_id)
    assert model_id.startswith(f"onnx:my-model-{MINILM_SHA256[:12]}@128x4-distinct-o16-solo-addln")
    shipped = load_local_provider(Settings(cache_dir=str(model_cache)), requantize=False)
    texts = REFERENCE["sentences"]
    assert _cosines(user.embed(texts), shipped.embed(texts)).min() > 0.9999


def test_an_incomplete_onnx_model_directory_names_the_missing_file(tmp_path: Path) -> None:
    folder = _onnx_dir(tmp_path)
    (folder / "tokenizer.json").unlink()
    settings = Settings(cache_dir=str(tmp_path), embed_provider="onnx", onnx_model_dir=str(folder))
    with pytest.raises(EmbeddingError, match="tokenizer.json is missing"):
        make_provider(settings)
    with pytest.raises(EmbeddingError, match="needs onnx_model_dir"):
        make_provider(Settings(embed_provider="onnx"))


def test_a_file_that_is_not_a_model_is_a_clear_error(tmp_path: Path) -> None:
    folder = _onnx_dir(tmp_path)
    (folder / "model.onnx").write_bytes(b"garbage")
    settings = Settings(cache_dir=str(tmp_path), embed_provider="onnx", onnx_model_dir=str(folder))
    with pytest.raises(EmbeddingError, match="onnxruntime cannot load the model .*model.onnx"):
        make_provider(settings)


def test_a_changed_derivation_is_a_different_model_and_file(tmp_path: Path, monkeypatch) -> None:
    """Vectors from two quantisations never mix: the onnxruntime (or onnx) that runs and derives the model
    is part of the model id the store and the shared cache are keyed by, and of the derived file's name."""
    import onnxruntime

    import codeloupe.embed.local as local

    settings = Settings(cache_dir=str(tmp_path))
    before = local_model_id(settings)
    derived_before = local._requantized_paths(settings.cache_root, MINILM_SHA256)[0]
    assert f"ort{onnxruntime.__version__}" in before
    monkeypatch.setattr(onnxruntime, "__version__", "0.0.1-another")
    assert local_model_id(settings) != before
    assert local._requantized_paths(settings.cache_root, MINILM_SHA256)[0] != derived_before
    monkeypatch.undo()
    monkeypatch.setattr(local, "_installed_version", lambda name: "9.9.9" if name == "onnx" else "?")
    assert local_model_id(settings) != before  # a new quantiser (onnx) alone also changes it


def test_a_killed_requantisation_leaves_nothing_behind_on_the_next_start(tmp_path: Path) -> None:
    """The real derivation, killed with SIGKILL once its work dir exists; the next start removes the dir
    and derives the model; a work dir of a live derivation (another editor) is left alone."""
    import signal
    import subprocess
    import sys
    import time

    settings = Settings(cache_dir=str(tmp_path))
    models = settings.cache_root / "models"
    script = ("import sys\nfrom pathlib import Path\nfrom codeloupe.embed.local import *\n"
              "requantized_model(shipped_model_path(), MINILM_SHA256, Path(sys.argv[1]))\n")
    child = subprocess.Popen([sys.executable, "-c", script, str(settings.cache_root)])
    try:
        deadline = time.monotonic() + 120
        while not list(models.glob("requantize-*/*")):
            assert child.poll() is None, "the derivation ended before it could be killed"
            assert time.monotonic() < deadline, "no work dir appeared"
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    (left,) = list(models.glob("requantize-*"))
    live = models / f"requantize-{os.getpid()}-inuse"
    live.mkdir()

    assert remove_stale_work_dirs(models) == [left]
    assert not left.exists() and live.exists()
    derived = requantized_model(shipped_model_path(), MINILM_SHA256, settings.cache_root)
    assert derived is not None and derived.is_file()
    assert [p.name for p in models.glob("requantize-*")] == [live.name]


def test_derived_models_unused_for_a_month_are_removed_and_a_loaded_one_is_kept(tmp_path: Path) -> None:
    """Each change of the derivation left a 23 MB file in every user's cache. Files unused for 30 days go; the
    one being loaded, a recently used one (another installation's), links and unrelated files stay, and loading
    a derived model marks it used."""
    import time

    models = tmp_path / "models"
    models.mkdir()
    month_ago = time.time() - 31 * 24 * 3600
    outside = tmp_path / "elsewhere.onnx"
    outside.write_bytes(b"not ours")
    files = {name: models / name for name in (
        "all-MiniLM-L6-v2-old-a.onnx", "all-MiniLM-L6-v2-old-b.onnx", "all-MiniLM-L6-v2-recent.onnx",
        "all-MiniLM-L6-v2-current.onnx", "user-model.onnx", "all-MiniLM-L6-v2-old.failed")}
    for path in files.values():
        path.write_bytes(b"x")
        if "recent" not in path.name:
            os.utime(path, (month_ago, month_ago))
    link = models / "all-MiniLM-L6-v2-link.onnx"
    link.symlink_to(outside)
    os.utime(outside, (month_ago, month_ago))
    os.utime(link, (month_ago, month_ago), follow_symlinks=False)

    removed = remove_outdated_derivations(models, keep=files["all-MiniLM-L6-v2-current.onnx"])

    assert sorted(p.name for p in removed) == ["all-MiniLM-L6-v2-old-a.onnx", "all-MiniLM-L6-v2-old-b.onnx"]
    assert sorted(p.name for p in models.iterdir()) == sorted(
        ["all-MiniLM-L6-v2-recent.onnx", "all-MiniLM-L6-v2-current.onnx", "user-model.onnx",
         "all-MiniLM-L6-v2-old.failed", "all-MiniLM-L6-v2-link.onnx"])
    assert outside.read_bytes() == b"not ours"
    assert remove_outdated_derivations(tmp_path / "missing", keep=link) == []


def test_loading_a_derived_model_marks_it_used(model_cache: Path, provider: OnnxSentenceEncoder) -> None:
    import time

    derived = requantized_model(shipped_model_path(), MINILM_SHA256, Settings(cache_dir=str(model_cache)).cache_root)
    assert derived is not None
    month_ago = time.time() - 31 * 24 * 3600
    os.utime(derived, (month_ago, month_ago))
    assert requantized_model(shipped_model_path(), MINILM_SHA256, derived.parent.parent) == derived
    assert time.time() - derived.stat().st_mtime < 3600 and derived.is_file()


def test_answering_queries_holds_one_copy_of_the_model_and_a_batch_opens_the_threaded_one(model_cache: Path) -> None:
    """The threaded session (a second copy of the model in memory) is opened by the first batch run in this
    process, and embeds as the single-thread session does."""
    texts = ["def f(x):\n    return x\n", "class A:\n    pass\n", "where are routes registered"]
    encoder = load_local_provider(Settings(cache_dir=str(model_cache)), requantize=False,
                                  options=EncoderOptions(threads=2))
    one_at_a_time = np.concatenate([encoder.embed([text]) for text in texts])
    encoder.embed_query("how does the lexer read a token")
    assert "_batch_session" not in vars(encoder)
    batched = encoder.embed(texts)
    assert vars(encoder)["_batch_session"] is not encoder._single
    assert _cosines(batched, one_at_a_time).min() > 0.9999


def test_the_derivation_runs_no_code_from_the_working_directory(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The derivation's child process runs `python -m codeloupe.embed.derive`, and `-m` puts the working directory
    first on the path; a language server often works in the workspace, so a repository holding its own
    `codeloupe/embed/derive.py` would have run there (rule 6). It never does, and the derivation still works."""
    hostile = tmp_path / "repo"
    for package in ("codeloupe", "codeloupe/embed"):
        (hostile / package).mkdir(parents=True)
        (hostile / package / "__init__.py").write_text("")
    ran = tmp_path / "ran"
    (hostile / "codeloupe" / "embed" / "derive.py").write_text(
        f"from pathlib import Path\nPath({str(ran)!r}).write_text('the repository ran code')\n")
    monkeypatch.chdir(hostile)
    derived = requantized_model(shipped_model_path(), MINILM_SHA256, tmp_path / "cache")
    assert not ran.exists()
    assert derived is not None and is_known_derived(derived)


def test_loading_the_embedded_model_leaves_no_telemetry_of_onnxruntime(tmp_path: Path) -> None:
    """onnxruntime 1.32 writes a device id under ~/.cache/Microsoft and queues usage events (the OS, the Python
    binary's path) for Microsoft's collector as it is imported: the default model is to send nothing anywhere."""
    import subprocess
    import sys

    # Variables under which onnxruntime keeps quiet on its own (a CI system's), so the test sees what a user gets.
    quiet = {"ORT_DISABLE_TELEMETRY", "ORT_RUNNING_UNIT_TESTS", "GITHUB_ACTIONS", "JENKINS_URL", "TF_BUILD",
             "XDG_CACHE_HOME"}
    env = {key: value for key, value in os.environ.items() if key not in quiet} | {"HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", "import codeloupe.embed.local"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")] == []
