#!/usr/bin/env python3
"""Bad input at scale (issue 10.4): generated TrainJob/runtime pairs through admission and the build
pipeline, generated stack configs through stack validation; prints counts, exits 1 on any
unexpected exception or unclear refusal.

Pairs start from well-formed documents (every ML policy, pod-group policy, initializers, patches)
and are then broken at random places: unicode, huge and negative numbers, NaN, deep nesting, wrong
types, unknown keys, missing keys. Each goes through what a user's document meets: the admission
webhook (AdmissionReview for the runtime and the TrainJob), the strict CLI checks and the build. A
refusal must be a message a user can act on; anything raised that is not a ControllerError is an
unexpected exception. Stack configs start from a valid stack and are broken the same way.

Usage: .venv/bin/python bench/bad_input.py [--pairs 10000] [--stacks 2000] [--seed 0] [--out DIR]
`--out` writes DIR/bad_input.json: the counts with the run's command, commit, date and machine.
`trainyard bench run bad_input` repeats it and writes bench/results/bad_input.json with the median and spread.
The fast slice of `make test` (tests/unit/test_bad_input_properties.py) runs the same with small counts.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from trainyard import k8s as K
from trainyard.benchkit import run_record, write_results
from trainyard.controller.admission import admission_review_response
from trainyard.controller.build import build_objects
from trainyard.controller.errors import ControllerError
from trainyard.controller.strict import strict_problems
from trainyard.toolchain.k8s_fields import pinned_job_fields
from trainyard.platform.stack_validation import check_stack
from trainyard.runtimes.model import Catalog, Release
from trainyard.toolchain.flux_templates import read_flux_templates

# ---- what a clear message is --------------------------------------------------------------------

UNCLEAR = ("Traceback", "NoneType", "object has no attribute", "unhashable", "not subscriptable", "KeyError",
           "TypeError", "index out of range", "object is not", "<function", "<built-in")


def unclear(message: object) -> str | None:
    """Why a refusal message is not one a user can act on (None when it is fine)."""
    text = str(message)
    if not text.strip():
        return "empty message"
    # a word quoted whole is the user's own value echoed back ("quota.cpu: 'KeyError' is not a Kubernetes
    # quantity": Hypothesis draws strings from the constants of the code it runs), not Python speaking
    text = re.sub(r"'[^'\s]*'|\"[^\"\s]*\"", "''", text)
    hit = next((bad for bad in UNCLEAR if bad in text), None)
    return f"Python internals in the message ({hit})" if hit else None


# ---- generators -----------------------------------------------------------------------------------

NASTY_TEXT = st.sampled_from(["", " ", "\u00e9\u00e8", "\U0001F600", "\u202e\u0000", "a" * 300, "1e999999999",
                              "NaN", "-0", "8GB", "1K", "\ud7ff", "node", "trainer", "\t\n", "{{x}}", "${HOME}"])
NASTY_NUMBERS = st.sampled_from([0, -1, -(2**63), 2**63, 2**31, 10**40, -(10**30), 0.5, -0.0, 1e308,
                                 float("inf"), float("nan"), True, False])


def deep(depth: int) -> object:
    value: object = {"x": 1}
    for level in range(depth):
        value = {"n": value} if level % 2 else [value]
    return value


NASTY = st.one_of(NASTY_TEXT, NASTY_NUMBERS, st.text(max_size=12), st.integers(), st.floats(),
                  st.none(), st.builds(list), st.builds(dict), st.integers(1, 400).map(deep),
                  st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))

QUANTITIES = st.one_of(st.sampled_from(["1", "2", "500m", "16Gi", "8", "0", "1.5", "8GB", "-2", "1e3", "1Ki", "NaN"]),
                       st.integers(-4, 16))
RESOURCES = st.fixed_dictionaries({}, optional={
    "requests": st.dictionaries(st.sampled_from(["cpu", "memory", K.GPU_RESOURCE, "example.com/x"]), QUANTITIES, max_size=3),
    "limits": st.dictionaries(st.sampled_from(["cpu", "memory", K.GPU_RESOURCE]), QUANTITIES, max_size=3)})
ML = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "numNodes": st.integers(-1, 4),
    "torch": st.fixed_dictionaries({}, optional={
        "numProcPerNode": st.sampled_from(["auto", "cpu", "gpu", 2, 0]),
        "elasticPolicy": st.fixed_dictionaries({}, optional={"minNodes": st.integers(0, 3), "maxNodes": st.integers(0, 4)})}),
    "mpi": st.fixed_dictionaries({}, optional={"numProcPerNode": st.integers(0, 4), "runLauncherAsNode": st.booleans(),
                                               "mpiImplementation": st.sampled_from(["OpenMPI", "Intel", "MPICH", "x"])}),
    "jax": st.builds(dict), "xgboost": st.builds(dict), "flux": st.builds(dict)}))
POD_GROUP = st.one_of(st.none(), st.sampled_from([{"coscheduling": {}}, {"volcano": {}}, {"volcanoo": {}},
                                                  {"volcano": {"networkTopology": {"mode": "soft"}}}]).map(copy.deepcopy))
ANCESTORS = st.sampled_from([None, "trainer", "dataset-initializer", "model-initializer"])
JOB_NAMES = st.sampled_from(["node", "launcher", "dataset-initializer", "model-initializer", "aux"])


def _job(name: str, ancestor: str | None, resources: dict, container: str) -> dict:
    meta = {"labels": {K.LABEL_ANCESTOR: ancestor}} if ancestor else {}
    return {"name": name, "replicas": 1, "template": {"metadata": meta, "spec": {"template": {"spec": {
        "containers": [{"name": container, "image": "img", "resources": resources}]}}}}}


JOBS = st.lists(st.builds(_job, JOB_NAMES, ANCESTORS, RESOURCES, st.sampled_from(["node", "dataset-initializer", "x"])),
                min_size=1, max_size=3, unique_by=lambda j: j["name"])


@st.composite
def runtimes(draw) -> dict:
    kind = draw(st.sampled_from(["ClusterTrainingRuntime", "TrainingRuntime"]))
    spec: dict = {"template": {"spec": {"replicatedJobs": draw(JOBS)}}}
    for key, strategy in (("mlPolicy", ML), ("podGroupPolicy", POD_GROUP)):
        value = draw(strategy)
        if value is not None:
            spec[key] = value
    meta = {"name": "rt", **({"namespace": "ns"} if kind == "TrainingRuntime" else {})}
    return {"apiVersion": K.TRAINER_API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


@st.composite
def trainjobs(draw, runtime_kind: str) -> dict:
    trainer = draw(st.fixed_dictionaries({}, optional={
        "numNodes": st.integers(-1, 5), "numProcPerNode": st.one_of(st.integers(0, 4), st.sampled_from(["auto", "gpu", "x"])),
        "image": st.text(max_size=8), "resourcesPerNode": RESOURCES,
        "command": st.sampled_from([["tune", "run"], ["torchrun", "train.py"], []]),
        "env": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["A", "PET_NNODES", ""]), "value": st.text(max_size=3)}),
                        max_size=2)}))
    spec: dict = {"runtimeRef": {"name": "rt", "kind": runtime_kind, "apiGroup": K.TRAINER_GROUP}}
    if trainer:
        spec["trainer"] = trainer
    if draw(st.booleans()):
        spec["initializer"] = {"dataset": {"storageUri": draw(st.sampled_from(["hf://x", "", "nope", "s3://b/k"]))}}
    if draw(st.booleans()):
        spec["suspend"] = draw(st.booleans())
    return {"apiVersion": K.TRAINER_API_VERSION, "kind": "TrainJob",
            "metadata": {"name": draw(st.sampled_from(["tj", "a" * 70, "TJ", "t\u00e9"])), "namespace": "ns", "uid": "u"},
            "spec": spec}


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every path into a document (for a mutation to aim at)."""
    out = [prefix]
    if isinstance(value, dict):
        for key, sub in value.items():
            out += _paths(sub, prefix + (key,))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            out += _paths(sub, prefix + (index,))
    return out


@st.composite
def mutated(draw, base: dict) -> dict:
    """`base` broken in 0-3 places: a nasty value, an unknown key, or a deleted key."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(0, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "replace", "unknown", "delete"]))
        if action == "replace":
            parent[path[-1]] = copy.deepcopy(draw(NASTY))
        elif action == "unknown" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["numNode", "volcanoo", "\U0001F600", "spec", "x" * 100]))] = copy.deepcopy(draw(NASTY))
        elif action == "delete":
            del parent[path[-1]]
    return doc


@st.composite
def pairs(draw) -> tuple[dict, dict]:
    runtime = draw(runtimes())
    trainjob = draw(trainjobs(runtime["kind"]))
    return draw(mutated(trainjob)), draw(mutated(runtime))


# ---- the pipeline a user's documents meet ---------------------------------------------------------

@dataclass
class Tally:
    generated: int = 0
    admitted: int = 0
    refused: int = 0
    built: int = 0
    build_refused: int = 0
    unexpected: Counter = field(default_factory=Counter)
    unclear: Counter = field(default_factory=Counter)
    samples: list = field(default_factory=list)

    def fail(self, kind: Counter, key: str, detail: str) -> None:
        kind[key] += 1
        if len(self.samples) < 5:
            self.samples.append(detail)


def _review(obj: object, kind: str) -> dict:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"kind": kind}, "operation": "CREATE", "object": obj}}


def check_pair(trainjob: dict, runtime: dict, tally: Tally) -> None:
    tally.generated += 1
    try:
        lookup = lambda kind, name, namespace=None: runtime if kind in ("ClusterTrainingRuntime", "TrainingRuntime") else None  # noqa: E731
        responses = [admission_review_response(_review(runtime, str(runtime.get("kind"))), lookup,
                                               flux_templates=read_flux_templates)["response"],
                     admission_review_response(_review(trainjob, "TrainJob"), lookup,
                                               flux_templates=read_flux_templates)["response"]]
        if all(r["allowed"] for r in responses):
            tally.admitted += 1
        else:
            tally.refused += 1
            for response in responses:
                if not response["allowed"] and (why := unclear(response["status"]["message"])):
                    tally.fail(tally.unclear, why, f"admission: {response['status']['message'][:300]}")
        found = strict_problems(trainjob, runtime, job_fields=pinned_job_fields())
        for error in found["unknown"] + found["errors"]:
            if why := unclear(error):
                tally.fail(tally.unclear, why, f"strict: {str(error)[:300]}")
    except Exception as err:  # noqa: BLE001 - counting them is the point
        tally.fail(tally.unexpected, f"admission {type(err).__name__}", traceback.format_exc(limit=4))
        return
    try:
        build_objects(trainjob, runtime, key_generator=lambda: (b"k", b"p"), flux_templates=read_flux_templates)
        tally.built += 1
    except ControllerError as err:
        tally.build_refused += 1
        if why := unclear(err):
            tally.fail(tally.unclear, why, f"build: {str(err)[:300]}")
    except Exception as err:  # noqa: BLE001
        tally.fail(tally.unexpected, f"build {type(err).__name__}", traceback.format_exc(limit=4))


VALID_STACK = {
    "kubeconfig": "/tmp/kubeconfig", "kubeContext": "test",
    "controller": {"webhook": {"certificate": "cert-manager"}},
    "cluster": {"nodes": 4, "gpusPerNode": 8, "cpuPerNode": 96, "memoryPerNode": "1024Gi"},
    "topology": {"racks": [{"name": "r1", "spine": "s1"}]},
    "scheduler": {"profile": "gang", "queuePlugin": "capacity"},
    "priorityClasses": [{"name": "train-default", "value": 1000}, {"name": "train-high", "value": 10000}],
    "queues": [{"name": "org", "capability": {K.GPU_RESOURCE: 32}}],
    "policies": {"podSecurity": "baseline"},
    "tenants": [
        {"name": "team-a", "namespace": "team-a", "catalogVersion": "1.1.0",
         "queue": {"name": "team-a", "parent": "org", "capability": {K.GPU_RESOURCE: 16}},
         "defaultPriorityClass": "train-default", "priorityClasses": ["train-high"],
         "quota": {"cpu": 96, "memory": "512Gi", "gpu": 16}, "limits": {"defaultCpu": "1"},
         "groups": {"admins": ["a"], "users": ["u"]}, "networkPolicy": {"defaultDeny": True}},
        {"name": "team-b", "namespace": "team-b", "catalogVersion": "1.0.0",
         "queue": {"name": "team-b"}, "quota": {"cpu": 96, "memory": "512Gi", "gpu": 8}},
    ],
}
CATALOG = Catalog(releases=(Release("1.1.0", "current", "x"), Release("1.0.0", "deprecated", "x"),
                            Release("0.9.0", "retired", "x")))


def check_stack_values(values: object, tally: Tally) -> None:
    tally.generated += 1
    try:
        _, problems = check_stack(values if isinstance(values, dict) else {"tenants": values}, file="stacks/x.yaml",
                                  catalog=CATALOG)
    except Exception as err:  # noqa: BLE001
        tally.fail(tally.unexpected, f"stack {type(err).__name__}", traceback.format_exc(limit=4))
        return
    errors = [p for p in problems if p.severity != "warning"]
    tally.refused += bool(errors)
    tally.admitted += not errors
    for problem in problems:
        if not (problem.field and problem.fix) or (why := unclear(problem.message) or unclear(problem.fix)):
            tally.fail(tally.unclear, "problem without field, message or fix" if not (problem.field and problem.fix)
                       else why, str(problem)[:300])


# ---- runs -------------------------------------------------------------------------------------------

BATCH = 1000
"""Examples per Hypothesis run: one run keeps every example's choices, and 10,000 large pairs in one run outgrew
24 GiB; batches of 1,000, each with its own seed (derived from --seed, so a rerun draws the same), stay flat."""


def _batches(count: int, seed: int, strategy, check) -> None:
    for index, start in enumerate(range(0, count, BATCH)):
        @hypothesis_seed(seed * 1_000_003 + index)
        @settings(max_examples=min(BATCH, count - start), deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def each(example):
            check(example)

        each()


def run_pairs(count: int, seed: int = 0) -> Tally:
    tally = Tally()
    _batches(count, seed, pairs(), lambda pair: check_pair(*pair, tally))
    return tally


def run_stacks(count: int, seed: int = 0) -> Tally:
    tally = Tally()
    _batches(count, seed, mutated(VALID_STACK), lambda values: check_stack_values(values, tally))
    return tally


def _print(title: str, tally: Tally, seconds: float, build: bool) -> None:
    print(f"{title}: generated {tally.generated}, admitted {tally.admitted}, refused {tally.refused}"
          + (f" (built {tally.built}, build refused {tally.build_refused})" if build else "")
          + f", unexpected exceptions {sum(tally.unexpected.values())}, unclear messages {sum(tally.unclear.values())}"
          f" [{seconds:.1f} s]")
    for key, count in (tally.unexpected + tally.unclear).most_common():
        print(f"  {count:6d}  {key}")
    for sample in tally.samples:
        print("  sample:", sample.replace("\n", "\n    "))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--stacks", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0, help="the seed of the examples drawn (a rerun with the same "
                        "seed draws the same)")
    parser.add_argument("--out", type=Path, help="write DIR/bad_input.json")
    args = parser.parse_args(argv)
    record = run_record(["bench/bad_input.py", *(sys.argv[1:] if argv is None else argv)])
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    start = time.monotonic()
    pair_tally = run_pairs(args.pairs, args.seed)
    middle = time.monotonic()
    _print("TrainJob/runtime pairs", pair_tally, middle - start, build=True)
    stack_tally = run_stacks(args.stacks, args.seed)
    _print("stack configs", stack_tally, time.monotonic() - middle, build=False)
    bad = sum((pair_tally.unexpected + pair_tally.unclear + stack_tally.unexpected + stack_tally.unclear).values())
    if args.out:
        write_results(args.out, "bad_input", record, {"pairs": _counts(pair_tally), "stacks": _counts(stack_tally),
                                                       "seconds": round(time.monotonic() - start, 1)})
    return 1 if bad else 0


def _counts(tally: Tally) -> dict:
    return {"generated": tally.generated, "admitted": tally.admitted, "refused": tally.refused,
            "unexpected_exceptions": sum(tally.unexpected.values()), "unclear_messages": sum(tally.unclear.values()),
            "unexpected_by_kind": dict(tally.unexpected), "unclear_by_kind": dict(tally.unclear)}


if __name__ == "__main__":
    sys.exit(main())
