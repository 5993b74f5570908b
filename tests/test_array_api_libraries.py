"""Libraries that dispatch on ``__array_namespace__`` accept nd4py arrays: scikit-learn with
``array_api_dispatch=True`` and SciPy with ``SCIPY_ARRAY_API=1``.

Each case runs an estimator or function on nd4py arrays (float64 and float32) and on the same
data as numpy arrays; the results must agree, keep numpy's dtype, and come back as nd4py arrays
wherever numpy's run returns an ``ndarray``. SciPy reads ``SCIPY_ARRAY_API`` when it is first
imported (and scikit-learn refuses array API dispatch without it), so the cases run together in
one subprocess with the variable set (``python tests/test_array_api_libraries.py`` prints their
outcomes as JSON); the tests here read that report. Neither library needs the standalone
``array-api-compat`` package: both vendor it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DTYPES = ("float64", "float32")

# -- the data ----------------------------------------------------------------------------------
_rng = np.random.default_rng(0)
X = _rng.standard_normal((40, 5))
X2 = _rng.standard_normal((40, 5))
Y_CLASS = (X[:, 0] + 0.3 * _rng.standard_normal(40) > 0).astype(np.int64)
Y_PRED = (X[:, 1] > 0).astype(np.int64)
Y_MULTI = np.digitize(X[:, 2], [-0.5, 0.5]).astype(np.int64)  # three classes
Y_REG = X @ np.arange(5.0) + 0.1 * _rng.standard_normal(40)
PROBA = 1.0 / (1.0 + np.exp(-X[:, 0]))
POS = np.abs(X) + 0.5


# -- scikit-learn cases: name -> fn(c) where c(a) makes the input array (floats in the dtype
# under test, integer labels as they are) --------------------------------------------------
def _sklearn_cases() -> dict:
    from sklearn import metrics as m
    from sklearn import preprocessing as pp
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis as LDA
    from sklearn.linear_model import Ridge, RidgeClassifier, RidgeCV
    from sklearn.metrics import pairwise as pw
    from sklearn.mixture import GaussianMixture
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB

    a, b = X[:8], X2[:6]
    cases = {
        "LinearDiscriminantAnalysis.transform": lambda c: LDA().fit(
            c(X), c(Y_CLASS)).transform(c(X)),
        "LinearDiscriminantAnalysis.predict_proba": lambda c: LDA().fit(
            c(X), c(Y_MULTI)).predict_proba(c(X)),
        "LinearDiscriminantAnalysis.predict": lambda c: LDA().fit(
            c(X), c(Y_MULTI)).predict(c(X)),
        "PCA(svd_solver='full')": lambda c: PCA(3, svd_solver="full").fit_transform(c(X)),
        "PCA(svd_solver='covariance_eigh')": lambda c: PCA(
            3, svd_solver="covariance_eigh").fit(c(X)).components_,
        "PCA(svd_solver='randomized')": lambda c: PCA(
            3, svd_solver="randomized", power_iteration_normalizer="QR",
            random_state=0).fit(c(X)).explained_variance_,
        "PCA.inverse_transform": lambda c: PCA(3, svd_solver="full").fit(c(X)).inverse_transform(
            c(X[:, :3])),
        "Ridge(solver='svd').predict": lambda c: Ridge(solver="svd").fit(
            c(X), c(Y_REG)).predict(c(X2)),
        "Ridge(solver='svd').coef_": lambda c: Ridge(alpha=2.0, solver="svd").fit(
            c(X), c(Y_REG)).coef_,
        "RidgeCV": lambda c: RidgeCV(alphas=(0.1, 1.0, 10.0)).fit(c(X), c(Y_REG)).predict(c(X2)),
        "RidgeClassifier": lambda c: RidgeClassifier(solver="svd").fit(
            c(X), c(Y_MULTI)).decision_function(c(X2)),
        "GaussianNB": lambda c: GaussianNB().fit(c(X), c(Y_MULTI)).predict_proba(c(X2)),
        "GaussianMixture": lambda c: GaussianMixture(
            2, init_params="random_from_data", random_state=0).fit(c(X)).predict_proba(c(X2)),
        "StandardScaler": lambda c: pp.StandardScaler().fit(c(X)).transform(c(X2)),
        "StandardScaler.inverse_transform": lambda c: pp.StandardScaler().fit(
            c(X)).inverse_transform(c(X2)),
        "MinMaxScaler": lambda c: pp.MinMaxScaler().fit(c(X)).transform(c(X2)),
        "MinMaxScaler.inverse_transform": lambda c: pp.MinMaxScaler().fit(
            c(X)).inverse_transform(c(X2)),
        "MaxAbsScaler": lambda c: pp.MaxAbsScaler().fit(c(X)).transform(c(X2)),
        "Normalizer": lambda c: pp.Normalizer().fit_transform(c(X)),
        "Binarizer": lambda c: pp.Binarizer(threshold=0.2).fit_transform(c(X)),
        "KernelCenterer": lambda c: pp.KernelCenterer().fit_transform(c(a @ a.T)),
        "PolynomialFeatures": lambda c: pp.PolynomialFeatures(2).fit_transform(c(X)),
        "LabelEncoder": lambda c: pp.LabelEncoder().fit_transform(c(Y_MULTI * 3 - 1)),
        "LabelEncoder.inverse_transform": lambda c: pp.LabelEncoder().fit(
            c(Y_MULTI * 3 - 1)).inverse_transform(c(Y_MULTI)),
        "LabelBinarizer": lambda c: pp.LabelBinarizer().fit_transform(c(Y_MULTI)),
        "train_test_split": lambda c: tuple(train_test_split(c(X), c(Y_REG), random_state=0)),
        "accuracy_score": lambda c: m.accuracy_score(c(Y_CLASS), c(Y_PRED)),
        "zero_one_loss": lambda c: m.zero_one_loss(c(Y_CLASS), c(Y_PRED)),
        "balanced_accuracy_score": lambda c: m.balanced_accuracy_score(c(Y_CLASS), c(Y_PRED)),
        "confusion_matrix": lambda c: m.confusion_matrix(c(Y_MULTI), c(Y_PRED)),
        "multilabel_confusion_matrix": lambda c: m.multilabel_confusion_matrix(
            c(Y_MULTI), c(Y_PRED)),
        "f1_score(macro)": lambda c: m.f1_score(c(Y_MULTI), c(Y_PRED), average="macro"),
        "precision_score": lambda c: m.precision_score(c(Y_CLASS), c(Y_PRED)),
        "recall_score": lambda c: m.recall_score(c(Y_CLASS), c(Y_PRED)),
        "fbeta_score": lambda c: m.fbeta_score(c(Y_CLASS), c(Y_PRED), beta=2.0),
        "jaccard_score": lambda c: m.jaccard_score(c(Y_CLASS), c(Y_PRED)),
        "hamming_loss": lambda c: m.hamming_loss(c(Y_CLASS), c(Y_PRED)),
        "cohen_kappa_score": lambda c: m.cohen_kappa_score(c(Y_CLASS), c(Y_PRED)),
        "log_loss": lambda c: m.log_loss(c(Y_CLASS), c(PROBA)),
        "brier_score_loss": lambda c: m.brier_score_loss(c(Y_CLASS), c(PROBA)),
        "roc_curve": lambda c: tuple(m.roc_curve(c(Y_CLASS), c(PROBA))),
        "roc_curve(drop_intermediate=False)": lambda c: tuple(m.roc_curve(
            c(Y_CLASS), c(PROBA), drop_intermediate=False)),
        "roc_auc_score": lambda c: m.roc_auc_score(c(Y_CLASS), c(PROBA)),
        "precision_recall_curve": lambda c: tuple(m.precision_recall_curve(
            c(Y_CLASS), c(PROBA))),
        "average_precision_score": lambda c: m.average_precision_score(c(Y_CLASS), c(PROBA)),
        "det_curve": lambda c: tuple(m.det_curve(c(Y_CLASS), c(PROBA))),
        "r2_score": lambda c: m.r2_score(c(Y_REG), c(Y_REG + 0.3)),
        "mean_squared_error": lambda c: m.mean_squared_error(c(Y_REG), c(Y_REG * 1.1)),
        "root_mean_squared_error": lambda c: m.root_mean_squared_error(c(Y_REG), c(Y_REG * 1.1)),
        "mean_absolute_error": lambda c: m.mean_absolute_error(c(Y_REG), c(Y_REG * 1.1)),
        "mean_absolute_percentage_error": lambda c: m.mean_absolute_percentage_error(
            c(Y_REG), c(Y_REG * 1.1)),
        "median_absolute_error": lambda c: m.median_absolute_error(c(Y_REG), c(Y_REG * 1.1)),
        "explained_variance_score": lambda c: m.explained_variance_score(
            c(Y_REG), c(Y_REG * 1.1)),
        "max_error": lambda c: m.max_error(c(Y_REG), c(Y_REG * 1.1)),
        "mean_pinball_loss": lambda c: m.mean_pinball_loss(c(Y_REG), c(Y_REG * 1.1)),
        "mean_squared_log_error": lambda c: m.mean_squared_log_error(c(POS[:, 0]), c(POS[:, 1])),
        "mean_poisson_deviance": lambda c: m.mean_poisson_deviance(c(POS[:, 0]), c(POS[:, 1])),
        "mean_gamma_deviance": lambda c: m.mean_gamma_deviance(c(POS[:, 0]), c(POS[:, 1])),
        "mean_tweedie_deviance": lambda c: m.mean_tweedie_deviance(
            c(POS[:, 0]), c(POS[:, 1]), power=1.5),
        "d2_tweedie_score": lambda c: m.d2_tweedie_score(c(POS[:, 0]), c(POS[:, 1]), power=1.5),
        "pairwise_distances": lambda c: m.pairwise_distances(c(a), c(b)),
        "pairwise_distances(manhattan)": lambda c: m.pairwise_distances(
            c(a), c(b), metric="manhattan"),
        "euclidean_distances": lambda c: pw.euclidean_distances(c(a), c(b)),
        "nan_euclidean_distances": lambda c: pw.nan_euclidean_distances(c(a), c(b)),
        "manhattan_distances": lambda c: pw.manhattan_distances(c(a), c(b)),
        "cosine_similarity": lambda c: pw.cosine_similarity(c(a), c(b)),
        "cosine_distances": lambda c: pw.cosine_distances(c(a), c(b)),
        "paired_euclidean_distances": lambda c: pw.paired_euclidean_distances(
            c(X[:6]), c(X2[:6])),
        "paired_cosine_distances": lambda c: pw.paired_cosine_distances(c(X[:6]), c(X2[:6])),
        "linear_kernel": lambda c: pw.linear_kernel(c(a), c(b)),
        "polynomial_kernel": lambda c: pw.polynomial_kernel(c(a), c(b)),
        "rbf_kernel": lambda c: pw.rbf_kernel(c(a), c(b)),
        "sigmoid_kernel": lambda c: pw.sigmoid_kernel(c(a), c(b)),
        "laplacian_kernel": lambda c: pw.laplacian_kernel(c(a), c(b)),
        "chi2_kernel": lambda c: pw.chi2_kernel(c(POS[:8]), c(POS[8:14])),
        "additive_chi2_kernel": lambda c: pw.additive_chi2_kernel(c(POS[:8]), c(POS[8:14])),
    }
    return cases


def _scipy_cases() -> dict:
    from scipy import fft, integrate, ndimage, signal, special, stats
    from scipy.cluster import vq
    from scipy.spatial import distance

    col, col2, small = X[:, 0], X2[:, 0], np.abs(X) / 4 + 0.1
    return {
        "special.logsumexp": lambda c: special.logsumexp(c(X), axis=0),
        "special.logsumexp(b=)": lambda c: special.logsumexp(c(X), axis=1, b=c(POS)),
        "special.softmax": lambda c: special.softmax(c(X), axis=1),
        "special.log_softmax": lambda c: special.log_softmax(c(X), axis=1),
        "special.expit": lambda c: special.expit(c(X)),
        "special.logit": lambda c: special.logit(c(small)),
        "special.erf": lambda c: special.erf(c(X)),
        "special.gammaln": lambda c: special.gammaln(c(POS)),
        "special.ndtr": lambda c: special.ndtr(c(X)),
        "special.xlogy": lambda c: special.xlogy(c(small), c(POS)),
        "special.entr": lambda c: special.entr(c(small)),
        "special.rel_entr": lambda c: special.rel_entr(c(small), c(POS)),
        "stats.zscore": lambda c: stats.zscore(c(X), axis=0),
        "stats.zmap": lambda c: stats.zmap(c(X), c(X2)),
        "stats.moment": lambda c: stats.moment(c(X), order=3, axis=0),
        "stats.skew": lambda c: stats.skew(c(X), axis=0),
        "stats.kurtosis": lambda c: stats.kurtosis(c(X), axis=0),
        "stats.variation": lambda c: stats.variation(c(X), axis=0),
        "stats.sem": lambda c: stats.sem(c(X), axis=0),
        "stats.gmean": lambda c: stats.gmean(c(POS), axis=0),
        "stats.hmean": lambda c: stats.hmean(c(POS), axis=0),
        "stats.entropy": lambda c: stats.entropy(c(POS), axis=0),
        "stats.rankdata": lambda c: stats.rankdata(c(X), axis=0),
        "stats.quantile": lambda c: stats.quantile(c(col), c(np.array([0.25, 0.5, 0.9]))),
        "stats.iqr": lambda c: stats.iqr(c(X), axis=0),
        "stats.ttest_ind": lambda c: tuple(stats.ttest_ind(c(X), c(X2), axis=0)),
        "stats.pearsonr": lambda c: tuple(stats.pearsonr(c(col), c(col2))),
        "stats.describe": lambda c: tuple(stats.describe(c(X), axis=0))[2:],
        "cluster.vq.whiten": lambda c: vq.whiten(c(X)),
        "cluster.vq.vq": lambda c: tuple(vq.vq(c(X), c(X[:3]))),
        "signal.detrend": lambda c: signal.detrend(c(X), axis=0),
        "signal.convolve": lambda c: signal.convolve(c(col), c(X[:5, 1])),
        "signal.lfilter": lambda c: signal.lfilter(c(np.array([1.0, 0.5])),
                                                   c(np.array([1.0, -0.2])), c(col)),
        "signal.savgol_filter": lambda c: signal.savgol_filter(c(col), 5, 2),
        "integrate.trapezoid": lambda c: integrate.trapezoid(c(X), axis=0),
        "integrate.cumulative_trapezoid": lambda c: integrate.cumulative_trapezoid(c(X), axis=0),
        "ndimage.gaussian_filter": lambda c: ndimage.gaussian_filter(c(X), 1.0),
        "ndimage.median_filter": lambda c: ndimage.median_filter(c(X), 3),
        "fft.dct": lambda c: fft.dct(c(col)),
        "fft.rfft": lambda c: fft.rfft(c(X), axis=0),
        "fft.fft": lambda c: fft.fft(c(col)),
        "fft.irfft": lambda c: fft.irfft(fft.rfft(c(col))),
        "signal.fftconvolve": lambda c: signal.fftconvolve(c(col), c(X[:5, 1])),
        "spatial.distance.pdist": lambda c: distance.pdist(c(X[:6])),
    }


# -- the subprocess: run every case, report "ok" or the failure ------------------------------
#: scikit-learn's numpy path runs SciPy's ``cdist`` here, which returns float64 for float32
#: input; its array API path keeps float32 (the values agree).
_NUMPY_PATH_UPCASTS = {"pairwise_distances(manhattan)", "manhattan_distances", "laplacian_kernel"}


def _compare(got, want, dtype: str, name: str = "") -> None:
    from numpy.testing import assert_allclose

    from samediff import NDArray
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), (type(got), len(want))
        for g, w in zip(got, want):
            _compare(g, w, dtype, name)
        return
    if isinstance(want, np.ndarray):
        assert isinstance(got, NDArray), f"expected an nd4py array, got {type(got).__name__}"
        upcast = name in _NUMPY_PATH_UPCASTS and (str(got.dtype), str(want.dtype)) == (
            "float32", "float64")
        assert got.dtype == want.dtype or upcast, \
            f"dtype {got.dtype}, numpy's run gives {want.dtype}"
    tol = {"rtol": 2e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-9, "atol": 1e-12}
    assert_allclose(np.asarray(got), np.asarray(want), **tol)


def _run_cases(cases: dict, dispatch) -> dict:
    import nd4py.array_api as xp
    report = {}
    for name, fn in cases.items():
        for dtype in DTYPES:
            def cast(a, dtype=dtype):
                a = np.asarray(a)
                return a.astype(dtype) if a.dtype.kind == "f" else a
            try:
                want = fn(cast)
                with dispatch():
                    got = fn(lambda a: xp.asarray(cast(a)))
                _compare(got, want, dtype, name)
                report[f"{name}[{dtype}]"] = "ok"
            except Exception:  # noqa: BLE001  (every failure goes into the report)
                report[f"{name}[{dtype}]"] = traceback.format_exc(limit=-8)
    return report


def _main() -> None:
    import contextlib
    import warnings
    warnings.simplefilter("ignore", RuntimeWarning)
    report = {}
    try:
        import sklearn
    except ImportError:
        pass
    else:
        report["sklearn"] = _run_cases(
            _sklearn_cases(), lambda: sklearn.config_context(array_api_dispatch=True))
    report["scipy"] = _run_cases(_scipy_cases(), contextlib.nullcontext)
    print(json.dumps(report))


# -- the tests -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def report() -> dict:
    env = dict(os.environ, SCIPY_ARRAY_API="1", PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, __file__], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(report: dict, library: str, name: str) -> None:
    for dtype in DTYPES:
        outcome = report[library][f"{name}[{dtype}]"]
        assert outcome == "ok", f"{name} with {dtype} nd4py arrays:\n{outcome}"


#: The releases these cases were checked with: older ones support fewer functions (the rest
#: convert to numpy and return numpy arrays), so they are skipped.
MIN_SKLEARN, MIN_SCIPY = "1.9", "1.17"


def _case_ids(make) -> list:
    try:
        return list(make())
    except ImportError:
        return ["not-installed"]


_SKLEARN_CASES = _case_ids(_sklearn_cases)
_SCIPY_CASES = _case_ids(_scipy_cases)


@pytest.mark.parametrize("name", _SKLEARN_CASES)
def test_sklearn_array_api_dispatch(report, name):
    pytest.importorskip("sklearn", minversion=MIN_SKLEARN)
    pytest.importorskip("scipy", minversion=MIN_SCIPY)  # SCIPY_ARRAY_API is required
    _check(report, "sklearn", name)


@pytest.mark.parametrize("name", _SCIPY_CASES)
def test_scipy_array_api(report, name):
    pytest.importorskip("scipy", minversion=MIN_SCIPY)
    _check(report, "scipy", name)


# -- the namespace behaviours these libraries rely on (no library needed) ------------------------
def test_unique_functions_sort_their_values():
    """numpy 2.3's ``unique_values`` no longer sorts; scikit-learn's class handling (the
    ``{0, 1}`` check of ``roc_curve``, ``LabelEncoder``...) relies on sorted classes."""
    import nd4py.array_api as xp
    data = np.array([[3.0, 1.0], [np.nan, 1.0], [np.nan, -2.0]])
    x = xp.asarray(data)
    np.testing.assert_array_equal(np.asarray(xp.unique_values(x)), [-2.0, 1.0, 3.0, np.nan,
                                                                     np.nan])
    values, indices, inverse, counts = xp.unique_all(x)
    assert np.asarray(counts).tolist() == [1, 2, 1, 1, 1]
    assert inverse.shape == x.shape  # the standard's shape; NaNs are distinct
    np.testing.assert_array_equal(np.asarray(values)[np.asarray(inverse)], data)
    np.testing.assert_array_equal(data.ravel()[np.asarray(indices)], np.asarray(values))
    assert np.asarray(xp.unique_counts(xp.asarray([2, 0, 2, 1])).values).tolist() == [0, 1, 2]
    inv = xp.unique_inverse(xp.asarray([5, 4, 5])).inverse_indices
    assert np.asarray(inv).tolist() == [1, 0, 1]


def test_numpy_call_forms_that_libraries_use():
    """``where(condition)`` (numpy's and torch's nonzero) and a positional ``n`` in ``diff``
    (scikit-learn's ``roc_curve``); the standard's forms are unchanged."""
    import nd4py.array_api as xp
    c = xp.asarray([True, False, True])
    (idx,) = xp.where(c)
    assert np.asarray(idx).tolist() == [0, 2]
    assert np.asarray(xp.where(c, 1.0, 2.0)).tolist() == [1.0, 2.0, 1.0]
    with pytest.raises(TypeError):
        xp.where(c, 1.0)
    v = xp.asarray([1.0, 4.0, 9.0, 16.0])
    assert np.asarray(xp.diff(v, 2)).tolist() == np.diff([1.0, 4.0, 9.0, 16.0], 2).tolist()
    assert np.asarray(xp.diff(v, n=2, axis=0)).tolist() == [2.0, 2.0]


if __name__ == "__main__":
    _main()
