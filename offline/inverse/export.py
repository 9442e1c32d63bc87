r"""Export of a trained inverse map to ONNX, normalisation inside the graph, with a check set.

Graph (double precision throughout)::

    features (N, nf) -> Sub(x_min) -> Mul(x_scale) -> [sklearn graph(s)] -> Mul(y_range) -> Add(y_min)
                     [-> Exp when the map learned log p] -> params (N, np);   std (N, np)

For the MLP, ``std`` is the constant validation-residual standard deviation; for the GP, each
parameter's GP gives its predictive standard deviation. A *check set* (features and the
scikit-learn predictions for them) is stored next to the model; :mod:`edge.inverse` runs it at
load time and refuses the map if ONNX Runtime disagrees by more than 1e-5 (in units of the
parameter range), which catches a tampered or mis-converted model.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from edge.features import FeatureConfig
from offline._deps import need
from offline.inverse.mlp import TrainedMap

OPSET = 17
INPUT, OUT_PARAMS, OUT_STD = "features", "params", "std"


def _convert(est, nf: int, return_std: bool):
    skl2onnx = need("skl2onnx")
    dt = need("skl2onnx.common.data_types")
    opts = None
    if return_std:
        gpm = need("sklearn.gaussian_process")
        opts = {gpm.GaussianProcessRegressor: {"return_std": True}}
    return skl2onnx.convert_sklearn(est, initial_types=[("x", dt.DoubleTensorType([None, nf]))],
                                    options=opts, target_opset=OPSET)


def to_onnx(tm: TrainedMap, name: str = "inverse_map") -> bytes:
    """Serialised ONNX model of ``tm`` with input ``features`` and outputs ``params``, ``std``."""
    onnx = need("onnx")
    helper, numpy_helper, compose = onnx.helper, onnx.numpy_helper, need("onnx.compose")
    nf, n_p = tm.x_min.size, tm.y_min.size
    nodes, inits = [], []

    def const(cname, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr, dtype=np.float64), cname))
        return cname

    # x_nor = (x - x_min) * x_scale   (min-max normalisation, paper 000 Appendix A)
    nodes.append(helper.make_node("Sub", [INPUT, const("x_min", tm.x_min[None])], ["x_shift"], name="norm_sub"))
    nodes.append(helper.make_node("Mul", ["x_shift", const("x_scale", tm.x_scale[None])], ["x_norm"], name="norm_mul"))
    inits.append(numpy_helper.from_array(np.array([-1, 1] if tm.kind == "gp" else [-1, n_p],
                                                  dtype=np.int64), "col_shape" if tm.kind == "gp" else "row_shape"))
    subs = [tm.model] if tm.kind == "mlp" else list(tm.model)
    means, stds = [], []
    opset = OPSET
    for j, est in enumerate(subs):
        m = _convert(est, nf, return_std=(tm.kind == "gp"))
        m = compose.add_prefix(m, prefix=f"m{j}_")
        opset = max([opset] + [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")])
        nodes.append(helper.make_node("Identity", ["x_norm"], [f"m{j}_x"], name=f"m{j}_in"))
        nodes.extend(m.graph.node)
        inits.extend(m.graph.initializer)
        outs = [o.name for o in m.graph.output]
        if tm.kind == "gp":  # one column per single-output GP
            nodes.append(helper.make_node("Reshape", [outs[0], "col_shape"], [f"m{j}_mean"], name=f"m{j}_mean_r"))
            means.append(f"m{j}_mean")
        else:  # the MLP gives all parameters at once; skl2onnx flattens them to (N*np, 1)
            nodes.append(helper.make_node("Reshape", [outs[0], "row_shape"], [f"m{j}_mean"], name=f"m{j}_mean_r"))
            means.append(f"m{j}_mean")
        if tm.kind == "gp":
            nodes.append(helper.make_node("Reshape", [outs[1], "col_shape"], [f"m{j}_std"], name=f"m{j}_std_r"))
            stds.append(f"m{j}_std")
    if len(means) > 1:
        nodes.append(helper.make_node("Concat", means, ["y_norm"], axis=1, name="concat_mean"))
    else:
        nodes.append(helper.make_node("Identity", means, ["y_norm"], name="mean_id"))
    # p = y_min + y_range * y_nor   (denormalisation)
    nodes.append(helper.make_node("Mul", ["y_norm", const("y_range", tm.y_range[None])], ["y_scaled"], name="denorm_mul"))
    p_out = "log_params" if tm.log_targets else OUT_PARAMS
    nodes.append(helper.make_node("Add", ["y_scaled", const("y_min", tm.y_min[None])], [p_out], name="denorm_add"))
    if tm.log_targets:
        # p = exp(log p)
        nodes.append(helper.make_node("Exp", [p_out], [OUT_PARAMS], name="exp"))
    if tm.kind == "gp":
        nodes.append(helper.make_node("Concat", stds, ["s_norm"], axis=1, name="concat_std"))
        if tm.log_targets:
            # std(p) ≈ p * y_range * std(y_nor)   (first-order propagation through exp)
            nodes.append(helper.make_node("Mul", ["s_norm", "y_range"], ["s_log"], name="std_mul"))
            nodes.append(helper.make_node("Mul", ["s_log", OUT_PARAMS], [OUT_STD], name="std_exp"))
        else:
            nodes.append(helper.make_node("Mul", ["s_norm", "y_range"], [OUT_STD], name="std_mul"))
    else:
        # std = 0 * y_norm + sigma_val   (validation-residual estimate, broadcast per row)
        nodes.append(helper.make_node("Mul", ["y_norm", const("zero", np.zeros((1, n_p)))], ["s0"], name="std_zero"))
        nodes.append(helper.make_node("Add", ["s0", const("sigma_val", tm.sigma_val[None])], [OUT_STD], name="std_add"))
    D = onnx.TensorProto.DOUBLE
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(INPUT, D, [None, nf])],
        [helper.make_tensor_value_info(OUT_PARAMS, D, [None, n_p]),
         helper.make_tensor_value_info(OUT_STD, D, [None, n_p])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="vsense.offline.inverse")
    model.ir_version = min(model.ir_version, 9)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def check_set(tm: TrainedMap, X, k: int = 32, seed: int = 0):
    """``k`` feature rows of ``X`` (seeded choice) and the scikit-learn predictions for them."""
    X = np.asarray(X, np.float64)
    idx = np.sort(np.random.default_rng(seed).choice(len(X), size=min(k, len(X)), replace=False))
    Xc = X[idx]
    P, S = tm.predict(Xc, return_std=True)
    return Xc, np.asarray(P, np.float64), np.asarray(S, np.float64)


def artifact(tm: TrainedMap, name: str, X_check, names, bounds, features: FeatureConfig,
             experiment: dict, n: int, nch: int, X_train, sigma_noise, k_check: int = 32) -> tuple[dict, dict]:
    """Bundle extras (arrays, keys ``inv_<name>_*``) and meta of one map.

    Parameters
    ----------
    X_check : (S, nf)    features to draw the check set from (test features)
    names : (np,)        parameter names;  bounds : (np, 2) training box [SI]
    X_train : (S, nf)    training features: their range is the in-distribution box on the edge
    sigma_noise : (nch,) measurement noise std used in training [SI]
    """
    blob = to_onnx(tm, name)
    Xc, Pc, Sc = check_set(tm, X_check, k_check)
    Xt = np.asarray(X_train, np.float64)
    arrays = {f"inv_{name}_onnx": np.frombuffer(blob, dtype=np.uint8).copy(),
              f"inv_{name}_check_x": Xc, f"inv_{name}_check_y": Pc, f"inv_{name}_check_std": Sc,
              f"inv_{name}_feat_lo": Xt.min(axis=0), f"inv_{name}_feat_hi": Xt.max(axis=0)}
    meta = {"kind": tm.kind, "names": list(names), "bounds": np.asarray(bounds, float).tolist(),
            "features": features.to_dict(), "experiment": experiment, "n": int(n), "nch": int(nch),
            "sigma_val": np.asarray(tm.sigma_val, float).tolist(),
            "noise_sigma": np.asarray(sigma_noise, float).reshape(-1).tolist(),
            "onnx_sha256": hashlib.sha256(blob).hexdigest()}
    return arrays, meta


def save_npz(path, arrays: dict, meta: dict) -> None:
    """Stand-alone inverse-map file (same arrays as the bundle extras, ``meta`` as JSON)."""
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays)
