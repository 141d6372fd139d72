"""Shape-generic tuning: a few option sets for a whole workload, and a
dispatch rule between them.

A workload is the size tuples a model meets, with how often each occurs
(``weights``).  One search measures every candidate at every size tuple of
the workload (a candidate's binary is the symbolic one, built once for all
of them).  Afterwards :func:`select` keeps at most ``max_sets`` option sets
that together serve the workload best -- greedily, each one added where it
lowers the weighted time (relative to the defaults) the most -- and
:func:`learn_rule` fits a decision tree (scikit-learn's
``DecisionTreeClassifier``) from the logarithms of the sizes to the set that
serves them.  The tree is stored as plain JSON in the database, so
``tcdsl.compile`` evaluates it (:func:`dispatch`) without scikit-learn.
"""
from __future__ import annotations

import math

# A set is kept only if it lowers the weighted relative time by this much.
MIN_GAIN = 0.01


def _features(names: list[str], sizes: dict[str, int]) -> list[float]:
    return [math.log2(float(sizes.get(k, 1)) + 1.0) for k in names]


def select(ratios: list[list[float | None]], weights: list[float], max_sets: int = 3) -> tuple[list[int], list[int]]:
    """``ratios[c][s]``: candidate ``c``'s time at size tuple ``s`` over the
    defaults' (None: failed).  Returns the chosen candidates and, for each
    size tuple, the index (into the chosen list) of the one that serves it."""
    inf = math.inf
    r = [[inf if x is None else x for x in row] for row in ratios]
    total = sum(weights) or 1.0
    w = [x / total for x in weights]
    chosen: list[int] = []
    current = [inf] * len(w)

    def cost(mins: list[float]) -> float:
        return sum(wi * m for wi, m in zip(w, mins) if wi)

    while len(chosen) < max_sets:
        best_c, best_cost = None, cost(current)
        for c, row in enumerate(r):
            if c in chosen:
                continue
            new = cost([min(a, b) for a, b in zip(current, row)])
            if new < best_cost - (MIN_GAIN * best_cost if chosen else 0.0):
                best_c, best_cost = c, new
        if best_c is None:
            break
        chosen.append(best_c)
        current = [min(a, b) for a, b in zip(current, r[best_c])]
    if not chosen:
        return [], []
    labels = [min(range(len(chosen)), key=lambda i: r[chosen[i]][s]) for s in range(len(w))]
    return chosen, labels


def learn_rule(names: list[str], sizes: list[dict[str, int]], labels: list[int], weights: list[float]) -> dict:
    """A decision tree from sizes to labels, as JSON data: ``{"names": [...],
    "nodes": [[feature, threshold, left, right, label], ...]}`` (node 0 the
    root; a leaf has feature -1)."""
    if len(set(labels)) <= 1:
        return {"names": list(names), "nodes": [[-1, 0.0, -1, -1, labels[0] if labels else 0]]}
    from sklearn.tree import DecisionTreeClassifier

    X = [_features(names, s) for s in sizes]
    tree = DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, labels, sample_weight=weights)
    t = tree.tree_
    nodes = []
    for i in range(t.node_count):
        leaf = t.children_left[i] == -1
        label = int(tree.classes_[int(t.value[i][0].argmax())])
        nodes.append([-1 if leaf else int(t.feature[i]), float(t.threshold[i]), int(t.children_left[i]),
                      int(t.children_right[i]), label])
    return {"names": list(names), "nodes": nodes}


def dispatch(rule: dict, sizes: dict[str, int]) -> int:
    """The label the rule gives ``sizes``."""
    x = _features(rule["names"], sizes)
    nodes = rule["nodes"]
    i = 0
    for _ in range(len(nodes)):
        feature, threshold, left, right, label = nodes[i]
        if feature < 0:
            return int(label)
        i = left if x[feature] <= threshold else right
    return int(nodes[0][4])
