"""Property tests: no generated TrainJob / runtime crashes the pipeline (BuildError or a result, nothing else)."""

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainyard.controller.admission import validate_runtime, validate_trainjob
from trainyard.controller.build import build_objects
from trainyard.controller.errors import BuildError
from trainyard.controller.status import build_status
from trainyard.toolchain.flux_templates import read_flux_templates

from ctl_builders import fixed_key, job, runtime, trainjob

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.text(max_size=6),
                    st.sampled_from(["auto", "cpu", "gpu", "1", "500m", "2Gi", "node", "trainer", "OpenMPI", "Intel"]))
json_like = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=10)

resources = st.fixed_dictionaries({}, optional={
    "requests": st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.sampled_from(["1", "2", "500m", "1Gi", 3])),
    "limits": st.dictionaries(st.sampled_from(["cpu", "nvidia.com/gpu", "vendor.io/x"]), st.sampled_from(["1", "4", 2]))})
trainer = st.fixed_dictionaries({}, optional={
    "numNodes": st.integers(0, 5), "numProcPerNode": st.one_of(st.integers(1, 4), st.sampled_from(["auto", "cpu", "gpu"])),
    "image": st.text(max_size=5), "env": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["A", "B", "PET_NNODES"]), "value": st.text(max_size=3)}), max_size=3),
    "resourcesPerNode": resources,
    # torchtune mode: exactly [tune, run] switches it on; its args pick LoRA/QLoRA and may hit runtime-owned keys
    "command": st.sampled_from([["tune", "run"], ["torchrun", "train.py"]]),
    "args": st.lists(st.sampled_from(["model.lora_attn_modules=[q]", "model.quantize_base=True", "model.use_dora=True",
                                      "output_dir=/o", "epochs=1", "=", "tokenizer.path"]), max_size=3)})
ml = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "numNodes": st.integers(0, 4),
    "torch": st.fixed_dictionaries({}, optional={"numProcPerNode": st.sampled_from(["auto", "cpu", "gpu", 2]),
                                                 "elasticPolicy": st.fixed_dictionaries({}, optional={"minNodes": st.integers(1, 3), "maxNodes": st.integers(1, 4), "maxRestarts": st.integers(0, 3)})}),
    "mpi": st.fixed_dictionaries({}, optional={"numProcPerNode": st.integers(1, 4), "runLauncherAsNode": st.booleans(),
                                               "mpiImplementation": st.sampled_from(["OpenMPI", "Intel", "MPICH", ""])}),
    "jax": st.just({}), "xgboost": st.just({}),
    "flux": st.fixed_dictionaries({}, optional={"numProcPerNode": st.integers(1, 3)})}))
pod_group = st.one_of(st.none(), st.sampled_from([{"coscheduling": {}}, {"volcano": {}}, {"volcano": {"networkTopology": {}}}]))
names = st.sampled_from(["node", "launcher", "dataset-initializer", "aux"])
ancestors = st.sampled_from([None, "trainer", "dataset-initializer", "model-initializer"])
jobs = st.lists(st.builds(lambda n, a, r: job(n, a, [{"name": "node", "resources": r}, {"name": n}]), names, ancestors, resources),
                max_size=3, unique_by=lambda j: j["name"])

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_everything(tj, rt):
    try:
        objects = build_objects(tj, rt, key_generator=fixed_key, flux_templates=read_flux_templates)
        assert isinstance(objects, list)
    except BuildError as err:
        assert str(err)
    result = validate_trainjob(tj, rt, flux_templates=read_flux_templates)
    assert all(str(e) for e in result.errors)
    validate_runtime(rt)
    try:
        assert isinstance(build_status(tj, None, "2025-01-01T00:00:00Z"), dict)
    except BuildError as err:
        assert str(err)


@SETTINGS
@given(trainer=st.one_of(st.none(), trainer), ml=ml, pod_group=pod_group, jobs=jobs, suspend=st.booleans(),
       rt_name=st.sampled_from(["rt", "torchtune-llama3.2-1b", "torchtune-qwen2.5-1.5b", "torchtune-llama3.3-70b"]))
def test_structured_inputs_never_crash(trainer, ml, pod_group, jobs, suspend, rt_name):
    tj = trainjob(runtime_name=rt_name, suspend=suspend, **({} if trainer is None else {"trainer": trainer}))
    check_everything(tj, runtime(jobs=jobs, ml=ml, pod_group=pod_group, name=rt_name))


@SETTINGS
@given(path=st.sampled_from([("spec",), ("spec", "trainer"), ("spec", "runtimeRef"), ("spec", "runtimePatches"),
                             ("spec", "podTemplateOverrides"), ("spec", "trainer", "env"), ("metadata",), ("spec", "initializer")]),
       value=json_like, on_runtime=st.booleans(),
       rt_path=st.sampled_from([("spec", "template", "spec", "replicatedJobs"), ("spec", "mlPolicy"), ("spec", "template"), ("spec",)]))
def test_garbage_fields_never_crash(path, value, on_runtime, rt_path):
    tj = trainjob(trainer={"numNodes": 2})
    rt = runtime(ml={"torch": {}}, pod_group={"volcano": {}})
    target, where = (rt, rt_path) if on_runtime else (tj, path)
    node = target
    for key in where[:-1]:
        node = node.setdefault(key, {}) if isinstance(node.get(key), dict) else node.__setitem__(key, {}) or node[key]
    node[where[-1]] = copy.deepcopy(value)
    check_everything(tj, rt)


@SETTINGS
@given(doc=json_like)
def test_arbitrary_documents_never_crash(doc):
    check_everything(doc, runtime())
    check_everything(trainjob(), doc)
