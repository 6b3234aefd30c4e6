"""Every option composes; bad inputs fail in one line before TensorFlow (no TF imported here)."""
from __future__ import annotations

from pathlib import Path

import pytest

from distexp import errors
from distexp.config import checks, resolved
from distexp.config import schema as C
from helpers import CONF

GROUPS = {g.name: sorted(p.stem for p in g.glob("*.yaml")) for g in CONF.iterdir() if g.is_dir()}


def test_groups_match_the_contract():
    from distexp import strategies
    from distexp.cluster import kinds

    assert GROUPS["strategy"] == sorted(strategies.names())
    assert set(GROUPS["model"]) >= {"mlp", "cnn", "resnet50", "mobilenet_v2"}
    assert set(GROUPS["dataset"]) >= {"digits", "synthetic"}
    assert GROUPS["loop"] == ["custom", "fit"]
    assert kinds.REGISTRY.names() == ("local", "tf_config", "slurm", "ray")  # the contract's order
    assert GROUPS["cluster"] == sorted(kinds.REGISTRY.names())


EXTRA = {("model", "custom"): ["model.factory=factories:small_mlp"],
         ("dataset", "custom"): ["dataset.factory=factories:blobs"],
         ("dataset", "tfds"): ["dataset.tfds_name=cifar100"],
         # seq2seq: the model and the data come together (one without the other is refused)
         ("model", "gru_seq2seq"): ["dataset=synthetic_pairs"],
         ("dataset", "synthetic_pairs"): ["model=gru_seq2seq"],
         ("dataset", "text_pairs"): ["model=gru_seq2seq", "dataset.path=pairs.txt"],
         # a TPU address: validation would try to reach it, so a name (TPUClusterResolver's)
         ("strategy", "tpu"): ["strategy.tpu=my-tpu"]}


@pytest.mark.parametrize("group,option", [(g, o) for g, opts in GROUPS.items() for o in opts
                                          if g not in ("experiment", "hparams_search")])
def test_every_option_composes(compose, group, option):
    cfg = compose(f"{group}={option}", *EXTRA.get((group, option), []))
    if group != "tracking":
        assert cfg[group].name == option
    assert checks.validate(cfg).rec.name == cfg.strategy.name  # accepted: its facts back


def test_defaults_are_the_contract(compose):
    cfg = compose()
    assert (cfg.strategy.name, cfg.model.name, cfg.dataset.name, cfg.loop.name) == \
        ("mirrored", "cnn", "digits", "custom")
    assert cfg.gpus is None and cfg.cpu_replicas == 1 and cfg.workers == 2 and cfg.ps == 1
    assert cfg.epochs == 5 and cfg.steps_per_epoch is None and cfg.batch_size_per_replica == 64
    assert cfg.global_batch_size is None and cfg.learning_rate is None and cfg.seed == 0
    assert cfg.tracking.enabled is True and cfg.tracking.experiment == "distexp"
    assert cfg.tracking.uri == f"sqlite:///{Path.cwd()}/outputs/mlflow.db"
    from distexp.tracking import lookup  # the report's and the UI's default: the same store

    assert lookup.default_uri() == cfg.tracking.uri


@pytest.mark.parametrize("overrides,needle", [
    (["strategy.cross_device_ops=bogus"], "strategy.cross_device_ops: received 'bogus'"),
    (["learning_rate=-0.1"], "learning_rate: received -0.1"),
    (["dataset=synthetic", "dataset.shape=[0,4,3]"], "dataset.shape: received [0, 4, 3]"),
])
def test_validate_rejects(compose, overrides, needle):
    with pytest.raises(errors.UserError, match=None) as err:
        checks.validate(compose(*overrides))
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_gpus_resolution():
    assert resolved.check_gpus(None, 0) == 0
    assert resolved.check_gpus(None, 4) == 4
    assert resolved.check_gpus(2, 4) == 2
    assert resolved.check_gpus(0, 4) == 0
    from distexp.strategies import REGISTRY

    with pytest.raises(errors.UserError) as err:
        resolved.check_gpus(2, 0, REGISTRY.load("mirrored", None))
    assert str(err.value) == ("gpus: received 2; 0 GPU(s) visible on this machine. "
                              "To run on CPU use gpus=0 cpu_replicas=2")


def test_visible_gpus_honours_cuda_visible_devices(monkeypatch, tmp_path):
    """A driver that lists 4 GPUs (a fake /proc/driver/nvidia/gpus): CUDA_VISIBLE_DEVICES picks
    among them, hides them all ("" or -1), and cannot add GPUs the driver does not have."""
    driver = tmp_path / "gpus"
    for bus in ("0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"):
        (driver / bus).mkdir(parents=True)
    monkeypatch.setattr(resolved, "NVIDIA_GPUS", str(driver))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert resolved.visible_gpus() == 4
    for env, visible in (("", 0), ("-1", 0), ("1", 1), ("0,2", 2), ("0,1,2,3,4,5", 4)):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
        assert (env, resolved.visible_gpus()) == (env, visible)
    monkeypatch.setattr(resolved, "NVIDIA_GPUS", str(tmp_path / "no-driver"))
    assert resolved.visible_gpus() == 0  # no driver: no GPU, whatever the variable says


def test_replicas_and_global_batch(compose):
    cfg = compose("strategy=mirrored", "cpu_replicas=2", "gpus=0")
    assert resolved.replicas_per_worker(cfg) == 2 and resolved.global_batch(cfg, 2) == 128
    cfg = compose("strategy=one_device", "cpu_replicas=4", "gpus=0")
    assert resolved.replicas_per_worker(cfg) == 1
    cfg = compose("cpu_replicas=2", "gpus=0", "global_batch_size=64")
    assert resolved.global_batch(cfg, 2) == 64


def test_flatten_gives_every_leaf_that_applies(compose):
    flat = C.flatten(compose("strategy=mirrored", "dataset=synthetic"))
    assert flat["strategy.name"] == "mirrored" and flat["model.name"] == "cnn"
    assert flat["gpus"] == "null" and flat["epochs"] == "5" and flat["dataset.shape"] == "[32, 32, 3]"
    assert flat["strategy.cross_device_ops"] == "null" and flat["dataset.shuffle_buffer"] == "10000"


@pytest.mark.parametrize("overrides,present,absent", [
    # the two: no dataset.shape for a user's dataset, no model.units for a CNN
    (["model=custom", "model.factory=mymodels:mnist_convnet", "dataset=custom",
      "dataset.factory=mydata:load"],
     ["model.factory", "dataset.factory", "dataset.num_classes"],
     ["dataset.shape", "dataset.size", "dataset.tfds_name", "model.units", "dataset.test_fraction"]),
    (["model=cnn"], ["model.min_size", "dataset.test_fraction"],
     ["model.units", "model.embedding_dim", "model.factory", "dataset.shape", "dataset.path",
      "strategy.communication", "strategy.tpu", "task.factory"]),
    (["model=gru_seq2seq", "dataset=synthetic_pairs"],
     ["model.units", "model.embedding_dim", "dataset.source_tokens", "dataset.size"],
     ["dataset.path", "dataset.shape", "dataset.num_classes"]),
    (["dataset=mnist", "strategy=multiworker"],
     ["dataset.tfds_name", "dataset.image_size", "strategy.communication"],
     ["dataset.test_fraction", "strategy.cross_device_ops"]),
])
def test_params_hold_only_the_keys_that_apply(compose, overrides, present, absent):
    flat = C.flatten(compose(*overrides))
    assert [k for k in present if k not in flat] == []
    assert [k for k in absent if k in flat] == []


def test_a_users_model_and_data_are_named_by_their_factory():
    """Not `mirrored-custom-custom-r1` / "custom on custom" for every user model."""
    from distexp.tracking import run_name, workload
    from distexp.tracking.display import description

    model, data = workload("model", "custom", "mymodels:mnist_convnet"), \
        workload("dataset", "custom", "pkg.data.load")
    assert (model, data) == ("mnist_convnet", "load")
    assert workload("model", "cnn", None) == "cnn" and workload("model", "custom", None) == "custom"
    assert workload("model", "cnn", "pkg:fn") == "cnn"  # a built-in keeps its name
    assert run_name("mirrored", model, "digits", 1) == "mirrored-mnist_convnet-digits-r1"
    params = {"strategy.name": "mirrored", "num_replicas": "1", "global_batch_size": "64",
              "model.name": "custom", "model.factory": "mymodels:mnist_convnet",
              "dataset.name": "digits", "loop.name": "custom"}
    assert description(params) == "mirrored, 1 replica, global batch 64 (mnist_convnet on digits, custom loop)"


def test_a_users_model_and_data_checkpoint_under_their_factorys_name(compose):
    """Two users' models do not share `mirrored-custom-custom`: the default checkpoint.dir names
    them as their runs are named; a built-in keeps its option's name."""
    def ckpt(*overrides):
        return compose(*overrides).checkpoint.dir

    mine = ("model=custom", "model.factory=mymodels:mnist_convnet", "dataset=custom",
            "dataset.factory=pkg.data:load")
    assert ckpt(*mine) == f"{Path.cwd()}/outputs/checkpoints/mirrored-mnist_convnet-load"
    assert ckpt("model=custom", "model.factory=mymodels:resnet_tiny").endswith(
        "/outputs/checkpoints/mirrored-resnet_tiny-digits")
    assert ckpt("model=mlp", "dataset=synthetic").endswith("/checkpoints/mirrored-mlp-synthetic")


def test_a_swept_options_key_composes_and_each_job_without_it_is_refused(compose):
    """`-m dataset=synthetic,text_pairs dataset.size=100`: Hydra composes the sweep's first config
    with the default option (digits), which must take the key; the checks then refuse it for a
    job whose option lacks it, in the line Hydra's own refusal gives (a key of a toy's node)."""
    for option in ("digits", "text_pairs"):
        cfg = compose(f"dataset={option}", "dataset.size=100")
        with pytest.raises(errors.UserError, match=rf"^dataset.size: unknown key for dataset="
                                                   rf"{option} \(received 100\); valid: name, "):
            checks.validate(cfg)
    assert compose("dataset=synthetic", "dataset.size=100").dataset.size == 100


def test_in_a_sweeps_job_another_options_key_is_ignored_and_not_part_of_the_set_up(compose,
                                                                                    monkeypatch):
    """`-m model=mlp,custom model.factory=a:f,a:g`: the factory is custom's; mlp's jobs ignore
    it (the checks pass, flatten leaves it out), so they are one set-up that runs once. A key of
    no option is refused in a sweep too."""
    from distexp.config.schema import flatten
    from distexp.sweeps import planning

    monkeypatch.setattr(checks, "in_multirun", lambda *a, **k: True)
    a, b = (compose("model=mlp", f"model.factory=factories:{f}") for f in ("crash", "small_mlp"))
    checks.validate(a)
    assert "model.factory" not in flatten(a)
    assert planning.setup(a).key == planning.setup(b).key
    assert planning.setup(a).key != planning.setup(compose("model=cnn")).key
    with pytest.raises(errors.UserError, match=r"^model.colour: unknown key for model=mlp"):
        checks.validate(compose("model=mlp", "+model.colour=red"))


@pytest.mark.parametrize("group", ["model", "dataset", "strategy", "cluster"])
def test_each_option_composes_onto_its_records_schema(compose, group):
    """One dataclass per option, its record's: the composed node is of that type and has its keys
    only; each of its keys has its own description for --help."""
    import dataclasses

    from omegaconf import OmegaConf

    from distexp.config import help as config_help
    from distexp.options import groups

    records = groups.GROUPS[group].REGISTRY
    for option in GROUPS[group]:
        node = compose(f"{group}={option}", "dataset=text_pairs" if group == "model" else
                       "model=gru_seq2seq" if group == "dataset" else "model=cnn")[group]
        rec = groups.known(group, node)
        assert OmegaConf.get_type(node) is rec.schema, option
        assert list(node.keys()) == [f.name for f in dataclasses.fields(rec.schema)], option
        docs = config_help.described(rec.schema)
        assert set(docs) == set(node.keys()), option
    assert {r.schema for r in records.values()} >= {OmegaConf.get_type(compose()[group])}


def test_every_option_record_names_an_implementation_that_exists():
    """The checks refuse a name before TensorFlow from the records; the trainer calls the
    implementation each record names: every built-in's module must define it (read, not
    imported: some import TensorFlow)."""
    import ast
    import importlib.util

    from distexp.options import datasets, loops, models, optimizers

    for group in (models, datasets, loops, optimizers):
        for rec in group.REGISTRY.values():
            module, _, fn = rec.implementation.partition(":")
            tree = ast.parse(open(importlib.util.find_spec(module).origin).read())
            assert fn in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, rec
    assert optimizers.REGISTRY.names() == ("adam", "sgd", "rmsprop")
    assert models.REGISTRY.names() == ("mlp", "cnn", "resnet50", "mobilenet_v2", "gru_seq2seq",
                                       "custom")


def test_help_describes_each_key_once_from_the_schema():
    """--help's descriptions are the schema fields' own (no comments read): every key a user sets
    has one, no key repeats its neighbour's, and the job's internal `resolved` has none."""
    from distexp.cluster import kinds
    from distexp.config import help as config_help
    from distexp.config.schema import Config

    docs = {k: m["help"] for k, m in config_help.descriptions(Config).items()}
    assert "resolved" not in docs
    assert docs["task.kwargs"] and docs["tracking.system_metrics_interval"]
    keys = list(docs)
    repeated = [(a, b) for a, b in zip(keys, keys[1:]) if docs[a] == docs[b]]
    assert repeated == []
    # a cluster kind's keys are its schema's, each described there
    own = {name: list(config_help.described(rec.schema)) for name, rec in kinds.REGISTRY.items()}
    assert own == {"local": ["name", "record", "host", "port"],
                   "tf_config": ["name", "record", "peer_start_timeout"],
                   "slurm": ["name", "record", "port", "peer_start_timeout"],
                   "ray": ["name", "record", "address", "placement", "cpus", "start_timeout"]}


def test_help_survives_hydras_template_substitution(compose):
    """Hydra substitutes $NAME in its help template: a description with a `$` (strategy.tpu's
    $TPU_NAME) is escaped, not a KeyError."""
    import string

    from distexp.config import help as config_help
    from distexp.config.schema import Config

    text = string.Template(config_help.render(compose("strategy=tpu"), Config)).substitute()
    assert "null = $TPU_NAME or this TPU VM's own" in " ".join(text.split())  # wrapped


def _own_keys(group: str, option: str):
    """The keys of an option's schema besides `name` and `record` (which every option has)."""
    import dataclasses

    from distexp.options import groups

    rec = groups.GROUPS[group].REGISTRY[option]
    return [f.name for f in dataclasses.fields(rec.schema) if f.name not in ("name", "record")]


def test_strategies_and_cluster_kinds_have_their_own_keys():
    """What each built-in's schema holds (Record.options and the cluster's `only` were the same
    facts kept by hand)."""
    assert {s: _own_keys("strategy", s) for s in GROUPS["strategy"]} == {
        "central": [], "mirrored": ["cross_device_ops"], "multiworker": ["communication"],
        "one_device": [], "ps": [], "tpu": ["tpu", "tpu_cores"]}
    assert {c: _own_keys("cluster", c) for c in GROUPS["cluster"]} == {
        "local": ["host", "port"], "slurm": ["port", "peer_start_timeout"],
        "tf_config": ["peer_start_timeout"], "ray": ["address", "placement", "cpus", "start_timeout"]}


# (strategy of the job, a key of another strategy, a value other than its default, the line)
OTHER_STRATEGYS_KEY = [
    ("one_device", "cross_device_ops", "nccl", "strategy.cross_device_ops: received 'nccl' with "
     "strategy=one_device; it applies to strategy=mirrored only: leave it at null"),
    ("mirrored", "communication", "ring", "strategy.communication: received 'ring' with "
     "strategy=mirrored; it applies to strategy=multiworker only: leave it at auto"),
    ("multiworker", "tpu_cores", "4", "strategy.tpu_cores: received 4 with strategy=multiworker; "
     "it applies to strategy=tpu only: leave it at 8"),
    ("tpu", "cross_device_ops", "hierarchical_copy", "strategy.cross_device_ops: received "
     "'hierarchical_copy' with strategy=tpu; it applies to strategy=mirrored only: leave it at "
     "null"),
]


@pytest.mark.parametrize("strategy,key,value,line", OTHER_STRATEGYS_KEY)
def test_another_strategys_key_is_one_line_for_a_job_and_ignored_in_a_sweep(
        compose, monkeypatch, strategy, key, value, line):
    """A single job: refused in one line (key, received, which strategies take it), and accepted
    at that key's default. A sweep's job (-m strategy=<its>,<other's> strategy.<key>=v): the key
    is ignored, left out of the params and of the job's set-up."""
    from distexp.sweeps import planning

    tpu = ["strategy.tpu=grpc://127.0.0.1:8470"] if strategy == "tpu" else []
    cfg = compose(f"strategy={strategy}", f"strategy.{key}={value}", "gpus=0", *tpu)
    with pytest.raises(errors.UserError) as err:
        checks.validate(cfg)
    assert str(err.value) == line
    default = line.rpartition("leave it at ")[2]
    at_default = compose(f"strategy={strategy}", f"strategy.{key}={default}", "gpus=0", *tpu)
    if strategy != "tpu":  # a tpu job needs a TPU to pass the checks
        checks.validate(at_default)
    assert f"strategy.{key}" not in C.flatten(at_default)

    monkeypatch.setattr(checks, "in_multirun", lambda *a, **k: True)
    assert f"strategy.{key}" not in C.flatten(cfg)
    if strategy != "tpu":
        checks.validate(cfg)
        plain = compose(f"strategy={strategy}", "gpus=0")
        assert planning.setup(cfg).key == planning.setup(plain).key
    with pytest.raises(errors.UserError, match=rf"^strategy.colour: unknown key for "
                                               rf"strategy={strategy} \(received red\); valid: "):
        checks.validate(compose(f"strategy={strategy}", "+strategy.colour=red", "gpus=0"))


def test_another_cluster_kinds_key_is_refused_for_a_job_and_ignored_in_a_sweep(compose,
                                                                              monkeypatch):
    cfg = compose("cluster=local", "cluster.peer_start_timeout=5")
    with pytest.raises(errors.UserError) as err:
        checks.validate(cfg)
    assert str(err.value) == ("cluster.peer_start_timeout: unknown key for cluster=local "
                              "(received 5); valid: name, record, host, port")
    monkeypatch.setattr(checks, "in_multirun", lambda *a, **k: True)
    checks.validate(cfg)
    assert "cluster.peer_start_timeout" not in C.flatten(cfg)


@pytest.mark.parametrize("group", ["strategy", "cluster"])
def test_help_lists_each_options_own_keys_under_it(compose, group):
    """--help under strategy=<s> (cluster=<c>) lists that option's keys, each with its schema's
    description, and no other option's."""
    from distexp.config import help as config_help
    from distexp.config.schema import Config
    from distexp.options import groups

    for option in GROUPS[group]:
        listed = {k: d for k, _, d in config_help.rows(compose(f"{group}={option}"), Config)
                  if k.startswith(f"{group}.")}
        assert list(listed) == [f"{group}.name"] + [f"{group}.{k}" for k in
                                                    _own_keys(group, option)], option
        docs = config_help.described(groups.GROUPS[group].REGISTRY[option].schema)
        assert all(listed[f"{group}.{k}"] == docs[k]["help"] for k in _own_keys(group, option))


def test_params_of_a_strategy_and_a_cluster_kind_are_their_schemas_keys(compose):
    flat = C.flatten(compose("strategy=multiworker", "cluster=slurm"))
    assert sorted(k for k in flat if k.startswith(("strategy.", "cluster."))) == [
        "cluster.name", "cluster.peer_start_timeout", "cluster.port",
        "strategy.communication", "strategy.name"]
    flat = C.flatten(compose("strategy=one_device"))
    assert sorted(k for k in flat if k.startswith(("strategy.", "cluster."))) == [
        "cluster.host", "cluster.name", "cluster.port", "strategy.name"]


@pytest.mark.parametrize("overrides", [
    ["strategy=multiworker", "cluster=slurm"], ["strategy=ps", "cluster=tf_config"],
    ["strategy=one_device", "strategy.record=my_pkg.mine", "cluster.record=my_pkg.kind"],
    ["model=gru_seq2seq", "dataset=synthetic_pairs", "loop=custom"], ["dataset=mnist"],
    ["model.record=my_pkg.model", "dataset=synthetic"]], ids=" ".join)
def test_params_and_help_list_the_same_keys_of_an_option(compose, overrides):
    """One answer to "which keys belong to an option" (distexp.options.groups.keys_of): the run's
    params and --help list the same keys of each option group; a `record` in both only when set
    (strategy.record=null was a param and not in --help)."""
    from distexp.config import help as config_help
    from distexp.config.schema import Config
    from distexp.options import groups

    cfg = compose(*overrides)
    flat = C.flatten(cfg)
    listed = [k for k, _, _ in config_help.rows(cfg, Config)]
    for group in groups.GROUPS:
        params = sorted(k for k in flat if k.startswith(f"{group}."))
        shown = sorted(k for k in listed if k.startswith(f"{group}."))
        assert params == shown == sorted(f"{group}.{k}" for k in groups.keys_of(group, cfg[group]))
        assert (f"{group}.record" in params) == (cfg[group].get("record") is not None), group


def test_repeats_auto_is_read_one_way_in_any_case():
    """config.schema.is_auto: what the checks accept as auto, the job's console reads as auto too
    (its rounds are sweep.max_repeats; int("AUTO") failed there)."""
    from omegaconf import OmegaConf

    from distexp.config import schema
    from distexp.job import lifecycle

    assert [schema.is_auto(v) for v in ("auto", " AUTO ", "Auto", 3, None, "autos")] == \
        [True, True, True, False, False, False]
    cfg = OmegaConf.create({"repeats": "AUTO", "sweep": {"max_repeats": 7}})
    assert lifecycle._rounds(cfg) == 7
    assert lifecycle._rounds(OmegaConf.create({"repeats": 3, "sweep": {"max_repeats": 7}})) == 3
