"""``samediff.distributed`` on a real ``LocalCluster`` (2 worker processes, 1 thread each):
parameter and gradient averaging against local ``fit``, blockwise inference against
``output``, a worker killed mid-epoch, damaged payloads, checkpoint and resume, dropout's
random draws per task (the same bits however often and wherever a task runs), and dask
DataFrames as data (the same bits as the same rows given as dask arrays).

The digits MLP of ``examples/mnist_mlp.py`` (Adam on a cosine schedule, L2), on subsets of
scikit-learn's 8x8 digits so the file runs in well under a minute on two cores.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytest.importorskip("distributed")
pytest.importorskip("sklearn")

import cloudpickle  # noqa: E402 (comes with distributed)
import dask.array as da  # noqa: E402
from distributed import Client, LocalCluster, WorkerPlugin  # noqa: E402

import nd4py as nd  # noqa: E402
from samediff.datasets import load_digits  # noqa: E402
from samediff.distributed import (DistributedTrainingError, fit_distributed,  # noqa: E402
                                  predict_blocks)
from samediff.distributed import fit as fit_module  # noqa: E402
from samediff.distributed import payload, tasks  # noqa: E402
from samediff import SameDiff, random_state  # noqa: E402
from samediff.errors import CorruptFileError, TrainingError  # noqa: E402
from samediff.evaluation import Evaluation  # noqa: E402
from samediff.training import (Adam, CosineSchedule, LambdaListener,  # noqa: E402
                               TrainingConfig)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
from mnist_mlp import build, one_hot  # noqa: E402

pytestmark = pytest.mark.heavy(seconds=45)

# the kill plugin below is defined here; workers get it by value (they cannot import tests/)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=50)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def digits():
    x_train, y_train, x_test, y_test = load_digits(test_fraction=0.2, seed=0)
    return (x_train, one_hot(y_train, 10)), (x_test, one_hot(y_test, 10))


def _model(steps: int = 1000, hidden: int = 32):
    nd.random.set_seed(0)
    return build(64, hidden, 10, steps)


def _same(a, b) -> bool:
    return all(np.array_equal(a.read_value(p), b.read_value(p)) for p in a.trainable_names()) \
        and all(np.array_equal(a.updater_state.arrays[p][s], b.updater_state.arrays[p][s])
                for p in a.updater_state.arrays for s in a.updater_state.arrays[p])


def _accuracy(sd, test) -> float:
    return sd.evaluate(test, "softmax", Evaluation()).accuracy()


@pytest.mark.parametrize("mode", ["average", "gradients"])
def test_one_partition_frequency_one_equals_local_fit_bit_for_bit(client, digits, mode):
    (x, y), _ = digits
    data = (x[:240], y[:240])
    local, remote = _model(), _model()
    h_local = local.fit(data, epochs=2, batch_size=16, verbose=0, seed=5)
    h_remote = remote.fit_distributed(data, client, epochs=2, batch_size=16,  # (the method)
                                      averaging_frequency=1, partitions=1, mode=mode, seed=5,
                                      verbose=0)
    assert _same(local, remote)
    s, r = local.updater_state, remote.updater_state
    assert (s.iteration, s.epoch, s.batch) == (r.iteration, r.epoch, r.batch) == (30, 2, 0)
    assert h_local.losses == pytest.approx(h_remote.losses, rel=1e-6)
    assert len(h_remote.rounds) == 30 and h_remote.retries == [0] * 30


class _KillOnce(WorkerPlugin):
    """Kills the worker process running a task whose key ends with ``suffix``, the first time
    any worker starts it (a marker file makes the retry survive)."""

    def __init__(self, suffix: str, marker: str) -> None:
        self.suffix, self.marker = suffix, marker

    def transition(self, key, start, finish, **kwargs):
        if finish == "executing" and str(key).endswith(self.suffix):
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.close(fd)
            os._exit(1)


def _scaled(steps: int, partitions: int):
    """The digits MLP for a run on ``partitions`` partitions: its cosine schedule spans the
    steps one partition takes, and its peak learning rate is scaled by the partition count
    (the linear scaling rule: averaging P workers' steps moves the parameters about as far as
    one step of P times the batch). Measured on this data, 20 epochs: local 95.3 %, two
    partitions 94.4 % unscaled, 95.8 % scaled."""
    sd = _model(steps, hidden=64)
    schedule = CosineSchedule(3e-3 * partitions, total_steps=steps, warmup_steps=steps // 20)
    sd.set_training_config(TrainingConfig(updater=Adam(schedule), l2=1e-4,
                                          feature_mapping=["input"], label_mapping=["labels"]))
    return sd


def test_two_workers_reach_local_accuracy_and_survive_a_killed_worker(client, digits,
                                                                       tmp_path):
    train, test = digits
    epochs, freq = 20, 15
    local = _scaled(epochs * -(-len(train[0]) // 16), 1)
    local.fit(train, epochs=epochs, batch_size=16, verbose=0, seed=1)
    per_partition = epochs * -(-len(train[0]) // 2 // 16)
    plain = _scaled(per_partition, 2)
    history = fit_distributed(plain, train, client, epochs=epochs, batch_size=16,
                              averaging_frequency=freq, partitions=2, seed=1, verbose=0)
    assert len(history.epochs) == epochs and sum(history.retries) == 0
    assert _accuracy(plain, test) >= _accuracy(local, test) - 0.005

    # the first two epochs again, with the worker running partition 1 of round 4 (epoch 1)
    # killed: Dask reruns that task elsewhere from its lineage, and the result is the same bits
    # as the same two epochs without the kill (so the 20-epoch run above is what it would be)
    short = _scaled(per_partition, 2)
    fit_distributed(short, train, client, epochs=2, batch_size=16, averaging_frequency=freq,
                    partitions=2, seed=1, verbose=0)
    client.register_plugin(_KillOnce("-4-p1", str(tmp_path / "killed")), name="kill-once")
    try:
        killed = _scaled(per_partition, 2)
        history = fit_distributed(killed, train, client, epochs=2, batch_size=16,
                                  averaging_frequency=freq, partitions=2, seed=1, verbose=0)
    finally:
        client.unregister_worker_plugin("kill-once")
    assert (tmp_path / "killed").exists()
    # partition 0 of that round may have been on the killed worker too (then it ran again)
    assert 1 in history.retried_partitions[4] and history.rounds[4].retries[1] == 1
    retried = sum(history.rounds[4].retries.values())
    assert sum(history.retries) == retried == history.epochs[1].metrics["retries"]
    assert _same(short, killed)
    assert _accuracy(killed, test) == _accuracy(short, test)
    client.wait_for_workers(2, timeout=60)  # the nanny restarted the killed worker


def test_predict_blocks_equals_output_exactly_and_loads_the_model_once_per_worker(client,
                                                                                  digits):
    _, (x_test, _) = digits
    sd = _model()
    before = sum(client.run(payload.loads).values())
    y = predict_blocks(sd, da.from_array(x_test, chunks=50), "softmax")
    assert y.chunks == (da.from_array(x_test, chunks=50).chunks[0], (10,))
    assert y.dtype == np.float32
    out = y.compute()
    assert np.array_equal(out, sd.output({"input": x_test}, "softmax")["softmax"].numpy())
    loaded = sum(client.run(payload.loads).values()) - before
    assert 1 <= loaded <= 2  # 8 blocks, the model loaded at most once per worker
    # an output of another rank: the predicted class per row
    sd.get_variable("softmax").argmax(1).rename("cls")
    classes = sd.predict_blocks(x_test, "cls").compute()  # (the method form)
    assert np.array_equal(classes, sd.output({"input": x_test}, "cls")["cls"].numpy())


def test_a_damaged_model_payload_is_a_named_error_on_the_client(client, digits, monkeypatch):
    (x, y), _ = digits
    real = fit_module.encode_model

    def truncated(model):
        data, _ = real(model)
        data = data[: len(data) // 2]
        return data, payload.digest_of(data)  # passes the digest: the loader must catch it
    monkeypatch.setattr(fit_module, "encode_model", truncated)
    with pytest.raises(DistributedTrainingError, match=r"partition \d failed.*CorruptFileError"
                       r".*model payload on worker tcp://") as info:
        fit_distributed(_model(), (x[:64], y[:64]), client, epochs=1, batch_size=16,
                        retries=0, verbose=0)
    assert isinstance(info.value.__cause__, CorruptFileError)
    assert info.value.round == 0 and len(info.value.partitions) == 1


def test_a_state_altered_in_transit_is_a_named_error(client, digits, monkeypatch):
    (x, y), _ = digits
    real = fit_module.encode_state

    def flipped(params, slots):
        data, digest = real(params, slots)
        return data[:-1] + bytes([data[-1] ^ 1]), digest
    monkeypatch.setattr(fit_module, "encode_state", flipped)
    with pytest.raises(DistributedTrainingError, match="training state received on worker "
                       ".* is damaged") as info:
        fit_distributed(_model(), (x[:64], y[:64]), client, epochs=1, batch_size=16,
                        retries=0, verbose=0)
    assert isinstance(info.value.__cause__, CorruptFileError)


class _Interrupt(Exception):
    pass


def test_checkpoint_and_resume_equal_an_uninterrupted_run(client, digits, tmp_path):
    (x, y), _ = digits
    data = (x[:320], y[:320])
    kw = dict(epochs=2, batch_size=16, averaging_frequency=4, partitions=2, seed=2, verbose=0)
    whole = _model()
    fit_distributed(whole, data, client, **kw)

    path = str(tmp_path / "run.sdz")

    def stop_at_round_4(trainer, iteration, loss):
        if len(trainer.history.rounds) == 4:
            raise _Interrupt
    with pytest.raises(_Interrupt):
        fit_distributed(_model(), data, client, checkpoint_every=3, checkpoint_path=path,
                        listeners=[LambdaListener(on_iteration_end=stop_at_round_4)], **kw)
    assert os.path.exists(path)
    resumed = _model()
    history = fit_distributed(resumed, data, client, checkpoint_every=3, checkpoint_path=path,
                              resume=True, **kw)
    assert len(history.rounds) == 6 - 3  # 3 rounds per epoch (4+4+2 batches); 3 were saved
    assert _same(whole, resumed)
    assert resumed.updater_state.iteration == whole.updater_state.iteration

    url = "memory://samediff-test/run.sdz"
    fit_distributed(_model(), data, client, checkpoint_every=1, checkpoint_path=url,
                    **{**kw, "epochs": 1})
    import fsspec
    assert fsspec.filesystem("memory").exists("/samediff-test/run.sdz")


def _dropout_model():
    """The digits MLP of ``_model`` with dropout (keep 0.8) on its hidden layer: its training
    steps draw random masks."""
    nd.random.set_seed(0)
    sd = SameDiff.create()
    inp = sd.placeholder("input", nd.FLOAT, -1, 64)
    labels = sd.placeholder("labels", nd.FLOAT, -1, 10)
    w1, b1 = sd.var("w1", "xavier", nd.FLOAT, 64, 32), sd.var("b1", nd.FLOAT, 32)
    w2, b2 = sd.var("w2", "xavier", nd.FLOAT, 32, 10), sd.var("b2", nd.FLOAT, 10)
    hidden = sd.nn.dropout(sd.nn.relu("hidden", inp.mmul(w1).add(b1), 0), p=0.8)
    logits = hidden.mmul(w2).add(b2)
    sd.nn.softmax("softmax", logits)
    sd.loss.softmax_cross_entropy("loss", labels, logits)
    sd.set_training_config(TrainingConfig(updater=Adam(3e-3), feature_mapping=["input"],
                                          label_mapping=["labels"]))
    return sd


def _equal_trees(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal_trees(a[k], b[k]) for k in a)
    return np.array_equal(a, b)


def test_a_rerun_task_draws_the_same_dropout_masks_in_any_process(client, digits):
    """A task run again — here, in this process after other draws, and on each worker — gives
    the same bits: it draws from its own stream, not from the process's global one. Another
    partition's task draws other masks."""
    (x, y), _ = digits
    sd = _dropout_model()
    data = (x[:96], y[:96])
    sd.fit(data, epochs=0, verbose=0)  # makes the updater state, as fit_distributed does
    model_bytes, model_digest = payload.encode_model(sd)
    state, state_digest = payload.encode_state(
        {p: sd.read_value(p) for p in sd.trainable_names()}, sd.updater_state.arrays)
    kw = dict(epoch=0, start=0, steps=4, batch_size=16, shuffle=True, seed=3, iteration=0,
              executor="compiled", on_nonfinite="raise")
    args = (model_bytes, model_digest, state, state_digest, data)

    def train(partition):
        return tasks.train_partition(*args, partition=partition, **kw)
    first = train(0)
    random_state.generator().random(1000)  # the global stream moves on; the task's does not
    assert _equal_trees(first["params"], train(0)["params"])
    assert not _equal_trees(first["params"], train(1)["params"])  # (dropout did draw)
    workers = list(client.scheduler_info()["workers"])
    remote = client.gather([client.submit(tasks.train_partition, *args, partition=0, **kw,
                                          workers=[w], allow_other_workers=False, pure=False)
                            for w in workers])
    for result in remote:
        assert _equal_trees(first["params"], result["params"])
        assert _equal_trees(first["slots"], result["slots"])
    # gradient averaging's task, likewise
    grad_kw = dict(epoch=0, index=1, batch_size=16, shuffle=True, seed=3, iteration=0,
                   executor="compiled")
    g = [tasks.partition_gradients(*args, partition=0, **grad_kw)["grads"] for _ in range(2)]
    assert _equal_trees(g[0], g[1])


def test_a_run_with_dropout_is_the_same_bits_run_to_run_even_when_a_worker_is_killed(
        client, digits, tmp_path):
    """Two partitions, dropout: the same seed gives the same model, and so does a run whose
    worker is killed mid-epoch (the recomputed task draws the lost one's masks). (One partition equals local ``fit`` in all but the masks:
    local ``fit`` draws from the global stream; see ``samediff/distributed/fit.py``.)"""
    (x, y), _ = digits
    kw = dict(epochs=2, batch_size=16, averaging_frequency=4, partitions=2, seed=4, verbose=0)
    data = (x[:320], y[:320])  # 10 batches per partition: 3 rounds per epoch
    first = _dropout_model()
    fit_distributed(first, data, client, **kw)
    client.register_plugin(_KillOnce("-4-p1", str(tmp_path / "killed")), name="kill-once")
    try:
        killed = _dropout_model()
        history = fit_distributed(killed, data, client, **kw)
    finally:
        client.unregister_worker_plugin("kill-once")
    # (partition 0 of that round may run again too: the scheduler may have put it on the
    # killed worker, by data locality, or its result may have died there before the merge)
    assert (tmp_path / "killed").exists() and 1 in history.retried_partitions[4]
    assert _same(first, killed)
    client.wait_for_workers(2, timeout=60)  # the nanny restarted the killed worker


def test_a_round_the_scheduler_cancels_runs_again_with_the_same_bits(client, digits,
                                                                     monkeypatch):
    """Dask may cancel a round's future while a worker dies ("already forgotten"): the round
    runs again under new keys, and the model is the bits of an uncancelled run, also when the
    scattered model itself was lost; a round cancelled every time ends in a named error."""
    from concurrent.futures import CancelledError
    (x, y), _ = digits
    kw = dict(epochs=1, batch_size=16, averaging_frequency=4, partitions=2, seed=4, verbose=0)
    data = (x[:160], y[:160])
    plain = _dropout_model()
    fit_distributed(plain, data, client, **kw)
    real_wait = fit_module._Run._wait

    def run_cancelling_the_second_round(lose_model: bool):
        """A run whose second round's first try is cancelled -- after the round's scattered
        model was lost with its workers, with ``lose_model`` (a run again on the same model
        future would be cancelled again, "lost dependencies": a fresh copy is scattered)."""
        calls: list = []

        def cancelled_once(self, final, watched, epoch):
            calls.append(self.count)
            if len(calls) == 2:  # the second round's first try
                if lose_model:
                    self.client.cancel([self.model], force=True)
                raise CancelledError("already forgotten")
            return real_wait(self, final, watched, epoch)
        monkeypatch.setattr(fit_module._Run, "_wait", cancelled_once)
        model = _dropout_model()
        fit_distributed(model, data, client, **kw)
        assert calls[1] == calls[2] == 1 and _same(plain, model)

    run_cancelling_the_second_round(lose_model=False)
    run_cancelling_the_second_round(lose_model=True)

    def always_cancelled(self, final, watched, epoch):
        raise CancelledError("already forgotten")
    monkeypatch.setattr(fit_module._Run, "_wait", always_cancelled)
    with pytest.raises(DistributedTrainingError, match="cancelled by the scheduler 3 time"):
        fit_distributed(_dropout_model(), data, client, retries=2, **kw)


# -- dask dataframes as data ------------------------------------------------------------------

def _frames(x, y, npartitions):
    """The digits rows as a pandas frame (features as float64 and one-hot labels as int64
    columns, so the worker's conversion to the float32 placeholders is exercised) and a dask
    frame of it; the feature and label column names."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    features, labels = [f"px{i}" for i in range(x.shape[1])], [f"is{i}" for i in range(10)]
    df = pd.concat([pd.DataFrame(x.astype(np.float64), columns=features),
                    pd.DataFrame(y.astype(np.int64), columns=labels)], axis=1)
    return df, dd.from_pandas(df, npartitions=npartitions), features, labels


@pytest.mark.parametrize("npartitions", [1, 2])
def test_a_dask_dataframe_trains_exactly_as_the_same_rows_as_dask_arrays(client, digits,
                                                                          npartitions):
    (x, y), _ = digits
    x, y = x[:160], y[:160]
    _, ddf, features, labels = _frames(x, y, npartitions)
    lengths = tuple(int(n) for n in ddf.map_partitions(len).compute())
    assert len(lengths) == npartitions and sum(lengths) == 160
    kw = dict(epochs=1, batch_size=16, averaging_frequency=3, seed=6, verbose=0)
    from_arrays = _model()
    fit_distributed(from_arrays, (da.from_array(x, chunks=(lengths, 64)),
                                  da.from_array(y, chunks=(lengths, 10))), client, **kw)
    from_frame = _model()
    # positional pieces with one partition, pieces by placeholder name with two
    data = ((ddf[features], ddf[labels]) if npartitions == 1 else
            {"input": ddf[features], "labels": ddf[labels]})
    history = fit_distributed(from_frame, data, client, **kw)
    assert _same(from_arrays, from_frame)
    assert len(history.rounds) == -(-max(-(-n // 16) for n in lengths) // 3)


def test_a_dask_series_is_a_column_unless_its_placeholder_is_one_dimensional(client):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    from samediff.distributed.data import Placeholders, partition
    ddf = dd.from_pandas(pd.DataFrame({"a": np.arange(6), "b": np.arange(6) * 0.5}),
                         npartitions=2)
    feeds = Placeholders({"flat": (np.dtype(np.int32), 1), "col": (np.dtype(np.float32), 2),
                          "wide": (np.dtype(np.float16), None)}, ["col", "wide"], ["flat"])
    parts = partition((ddf["b"], ddf[["a", "b"]], ddf["a"]), client, None, feeds)
    assert parts.lengths == [3, 3]
    col, wide, flat = client.gather(parts.futures[1])
    assert col.dtype == np.float32 and col.shape == (3, 1)
    assert np.array_equal(col[:, 0], [1.5, 2.0, 2.5])
    assert wide.dtype == np.float16 and wide.shape == (3, 2)
    assert flat.dtype == np.int32 and np.array_equal(flat, [3, 4, 5])
    by_name = client.gather(partition({"flat": ddf["a"]}, client, None, feeds).futures[0])
    assert list(by_name) == ["flat"] and by_name["flat"].shape == (3,)


def test_dataframe_pieces_that_do_not_line_up_or_are_not_numeric_are_named_errors(client,
                                                                                  digits):
    (x, y), _ = digits
    df, ddf, features, labels = _frames(x[:40], y[:40], 2)
    dd = pytest.importorskip("dask.dataframe")
    sd = _model()
    kw = dict(epochs=1, batch_size=16, verbose=0)
    with pytest.raises(TrainingError, match=r"do not line up.*npartitions: 'input' "
                       r"2, 'labels' 3.*divisions"):
        fit_distributed(sd, (ddf[features], dd.from_pandas(df, npartitions=3)[labels]),
                        client, **kw)
    # same partitions and divisions, but another frame (the rows reversed)
    other = dd.from_pandas(df.iloc[::-1].reset_index(drop=True), npartitions=2)
    assert other.divisions == ddf.divisions
    with pytest.raises(TrainingError, match=r"do not line up.*source frames") as info:
        fit_distributed(sd, (ddf[features], other[labels]), client, **kw)
    assert "npartitions" not in str(info.value)
    # a piece filtered on its own: caught on the worker, naming the partition
    with pytest.raises(TrainingError, match=r"partition \d of the dataframe pieces "
                       r"has different row counts"):
        fit_distributed(sd, (ddf[ddf.px10 > 0][features], ddf[labels]), client, **kw)
    strings = ddf.assign(name=ddf.px0.astype(str))
    with pytest.raises(TrainingError, match=r"column 'name' \(for 'input'\) has "
                       r"dtype .*not numeric"):
        fit_distributed(sd, (strings[features[:-1] + ["name"]], strings[labels]), client, **kw)
    with pytest.raises(TrainingError, match=r"repartition the frame first"):
        fit_distributed(sd, (ddf[features], ddf[labels]), client, partitions=3, **kw)
    with pytest.raises(TrainingError, match=r"cannot read data of type DataFrame "
                       r"\(a whole dask DataFrame"):
        fit_distributed(sd, ddf, client, **kw)
