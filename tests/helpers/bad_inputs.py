"""The bad-input matrix (tests/cli/test_bad_inputs.py in this process, tests/cli/test_bad_inputs_cli.py
through a real `python -m distexp`): wrong inputs as users type them, and the one line each must
give. No TensorFlow here."""
from __future__ import annotations

import re

from helpers.cli import ROOT
from helpers.servers import free_port

TRAINER = "trainer"  # fails inside the training process: the run exists and must end FAILED

# (id, args, the start of the error line after "distexp: error: ")  {cwd} / {port} are filled in.
CASES = [
    # an unknown option in each group
    ("strategy-option", ["strategy=bogus"],
     "strategy: received 'bogus'; valid: central, mirrored, multiworker, one_device, ps"),
    ("model-option", ["model=vgg"], "model: received 'vgg'; valid: "),
    ("dataset-option", ["dataset=imagenet"], "dataset: received 'imagenet'; valid: "),
    ("loop-option", ["loop=keras"], "loop: received 'keras'; valid: custom, fit"),
    ("cluster-option", ["cluster=k8s"], "cluster: received 'k8s'; valid: "),
    ("tracking-option", ["tracking=remote"], "tracking: received 'remote'; valid: "),
    # wrong types
    ("epochs-type", ["epochs=abc"], "epochs: received 'abc'; expected integer"),
    ("gpus-type", ["gpus=two"], "gpus: received 'two'; expected integer"),
    ("lr-type", ["learning_rate=fast"], "learning_rate: received 'fast'; expected float"),
    ("bool-type", ["tracking.enabled=maybe"],
     "tracking.enabled: received 'maybe'; expected bool (true or false)"),
    ("list-type", ["dataset=synthetic", "dataset.shape=abc"],
     "dataset.shape: received 'abc'; expected a list"),
    ("null-not-optional", ["tracking.experiment=null"], "tracking.experiment: received null"),
    ("unparsable", ["epochs=[1"], "epochs: received '[1', which Hydra cannot parse"),
    # keys that do not exist
    ("unknown-key", ["epocs=3"], "epocs: unknown key"),
    ("unknown-added-key", ["+epocs=3"], "epocs: unknown key"),
    ("unknown-nested-key", ["strategy.cros_device_ops=nccl"], "strategy.cros_device_ops: unknown key"),
    # a key of another option (each option's node has its own keys only)
    ("other-options-key", ["model.units=3"], "model.units: unknown key for model=cnn (received 3); "
                                             "valid: name, optimizer, learning_rate, min_size, "
                                             "resize, record"),
    ("other-options-added-key", ["+dataset.shape=[8,8,1]"],
     "dataset.shape: unknown key for dataset=digits (received [8, 8, 1]); valid: name, task, "
     "shuffle_buffer, prefetch, threadpool, on_device, record, test_fraction"),
    ("nccl-on-cpu", ["strategy.cross_device_ops=nccl"],
     "strategy.cross_device_ops: received 'nccl'; NCCL needs GPUs and this job trains on CPU"),
    # out of range
    ("gpus-beyond-visible", ["gpus=2"], "gpus: received 2; 0 GPU(s) visible on this machine. "
                                        "To run on CPU use gpus=0 cpu_replicas=2"),
    ("epochs-zero", ["epochs=0"], "epochs: received 0; expected >= 1"),
    ("epochs-negative", ["epochs=-3"], "epochs: received -3; expected >= 1"),
    ("batch-zero", ["batch_size_per_replica=0"], "batch_size_per_replica: received 0; expected >= 1"),
    ("steps-zero", ["steps_per_epoch=0"], "steps_per_epoch: received 0; expected >= 1"),
    ("workers-zero", ["strategy=multiworker", "workers=0"], "workers: received 0; expected >= 1"),
    ("cpu-replicas-zero", ["cpu_replicas=0"], "cpu_replicas: received 0; expected >= 1"),
    ("warmup-negative", ["warmup_steps=-1"], "warmup_steps: received -1; expected >= 0"),
    ("timeout-negative", ["timeout=-5"], "timeout: received -5.0; expected seconds > 0"),
    ("classes-one", ["dataset=synthetic", "dataset.num_classes=1"],
     "dataset.num_classes: received 1; expected >= 2"),
    ("test-fraction", ["dataset.test_fraction=1.5"], "dataset.test_fraction: received 1.5"),
    ("optimizer", ["model.optimizer=adagrad"],
     "model.optimizer: received 'adagrad'; valid: adam, sgd, rmsprop"),
    ("lr-scaling", ["learning_rate_scaling=cubic"],
     "learning_rate_scaling: received 'cubic'; valid: none, linear, sqrt"),
    # combinations
    ("global-batch-indivisible", ["cpu_replicas=2", "global_batch_size=65"],
     "global_batch_size: received 65; it must divide evenly over 2 replicas (try 64)"),
    ("fit-central", ["strategy=central", "loop=fit"], "loop: received 'fit' with strategy=central"),
    ("fit-multiworker", ["strategy=multiworker", "loop=fit"],
     "loop: received 'fit' with strategy=multiworker; Keras 3 fit cannot train it across worker "
     "processes (keras-team/keras#20585): use loop=custom"),
    ("ps-without-ps", ["strategy=ps", "ps=0"], "ps: received 0; strategy=ps needs at least 1"),
    # a user's factory
    ("factory-missing", ["model=custom"], "model.factory: received null"),
    ("factory-no-colon", ["model=custom", "model.factory=justaname"],
     "model.factory: received 'justaname'; expected 'package.module:function'"),
    ("factory-no-module", ["model=custom", "model.factory=nosuchmodule:build"],
     "model.factory: received 'nosuchmodule:build'; no module named 'nosuchmodule'"),
    ("repeats-single-run", ["repeats=2"],
     "repeats: received 2 for a single run; repeats are runs of a sweep's jobs: add -m"),
    ("repeats-auto-single-run", ["repeats=auto"],
     "repeats: received auto for a single run; repeats are runs of a sweep's jobs: add -m"),
    ("repeats-not-a-number", ["repeats=twice"],
     "repeats: received 'twice'; valid: auto or an integer >= 1"),
    ("sweep-alpha", ["repeats=auto", "sweep.alpha=0"],
     "sweep.alpha: received 0.0; expected 0 < x < 1, e.g. 0.05"),
    # every key checked (tests/config/test_key_checks.py walks the schema): edge values, keys that do
    # nothing for the chosen option or kind of run, the nearest valid name
    ("sweep-alpha-without-auto", ["sweep.alpha=2"],
     "sweep.alpha: received 2.0 with repeats=1; it applies to repeats=auto only"),
    ("sweep-seed-by-round-without-auto", ["sweep.seed_by_round=false"],
     "sweep.seed_by_round: received False with repeats=1; it applies to repeats=auto or repeats=N"),
    ("sweep-accuracy-margin-zero", ["repeats=auto", "sweep.accuracy_margin=0"],
     "sweep.accuracy_margin: received 0.0; expected points > 0, e.g. 0.5"),
    ("sweep-max-repeats-one", ["repeats=auto", "sweep.max_repeats=1"],
     "sweep.max_repeats: received 1; expected >= 2"),
    ("sweep-resume-single-run", ["sweep.resume=20261122-221652-b3e381"],
     "sweep.resume: received '20261122-221652-b3e381' for a single run; it applies to a sweep "
     "only"),
    ("record-with-a-built-in", ["model=cnn", "model.record=my_pkg.models"],
     "model.record: received 'my_pkg.models' with model=cnn, a built-in option that does not use "
     "it"),
    ("unknown-key-nearest", ["epoch=3"],
     "epoch: unknown key (not in the schema) (did you mean epochs?)"),
    ("option-nearest", ["strategy=mirorred"], "strategy: received 'mirorred' (did you mean "
                                              "mirrored?); valid: "),
    ("dataset-factory-no-module", ["dataset=custom", "dataset.factory=nosuchmodule:load"],
     "dataset.factory: received 'nosuchmodule:load'; no module named 'nosuchmodule'"),
    ("factory-no-function", ["model=custom", "model.factory=factories:nosuchfunction"],
     "model.factory: received 'factories:nosuchfunction'; {root}/tests/helpers/user_code/factories.py defines no "
     "'nosuchfunction'; valid: its functions: blobs, blobs_tfdata, crash, deep_cnn, dropout_mlp, "
     "explode"),
    ("factory-function-typo", ["model=custom", "model.factory=factories:small_mpl"],
     "model.factory: received 'factories:small_mpl'; {root}/tests/helpers/user_code/factories.py defines no "
     "'small_mpl' (did you mean factories:small_mlp?)"),
    ("dataset-factory-typo", ["dataset=custom", "dataset.factory=factories:blob"],
     "dataset.factory: received 'factories:blob'; {root}/tests/helpers/user_code/factories.py defines no 'blob' "
     "(did you mean factories:blobs?)"),
    ("task-factory-typo", ["task.factory=factories:mse_tsk"],
     "task.factory: received 'factories:mse_tsk'; {root}/tests/helpers/user_code/factories.py defines no "
     "'mse_tsk' (did you mean factories:mse_task?)"),
    ("factory-raises", ["model=custom", "model.factory=factories:explode", TRAINER],
     "model.factory: factories:explode raised RuntimeError: factory exploded on purpose"),
    ("factory-not-a-model", ["model=custom", "model.factory=factories:not_a_model", TRAINER],
     "model.factory: factories:not_a_model returned a list ([<Flatten"),
    # where things are written
    ("outputs-unwritable", ["hydra.run.dir={cwd}/afile/run"],
     "outputs: received '{cwd}/afile/run', which cannot be written (Not a directory)"),
    ("tracking-store-unwritable", ["tracking.uri=sqlite:///{cwd}/afile/mlflow.db"],
     "tracking.uri: received 'sqlite:///{cwd}/afile/mlflow.db'; cannot create {cwd}/afile"),
    ("tracking-server-down", ["tracking.uri=http://127.0.0.1:{port}"],
     "tracking.uri: received 'http://127.0.0.1:{port}'; MLflow cannot be reached there "
     "([Errno 111] Connection refused)"),
    ("tracking-scheme", ["tracking.uri=bogus://x"],
     "tracking.uri: received 'bogus://x'; MLflow cannot be reached there (unsupported URI"),
    # clusters: "env:NAME=value" sets the job's environment; a taken port is not an
    # error (the job retries on free ports: tests/cluster/test_multiprocess.py)
    ("tf-config-malformed", ["strategy=multiworker", "cluster=tf_config", "env:TF_CONFIG={bad"],
     "TF_CONFIG: received '{bad'; expected JSON"),
    ("tf-config-task-outside", ["strategy=multiworker", "cluster=tf_config",
                                'env:TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},'
                                '"task":{"type":"worker","index":5}}'],
     "TF_CONFIG: received task worker:5; the cluster has worker x1"),
    ("tf-config-missing", ["strategy=multiworker", "cluster=tf_config", "env:TF_CONFIG="],
     "cluster: received 'tf_config' but TF_CONFIG is not set"),
    ("cluster-port", ["strategy=multiworker", "cluster.port=80"],
     "cluster.port: received 80; expected 1024..65534"),
    ("cluster-port-top", ["strategy=multiworker", "cluster.port=65535"],
     "cluster.port: received 65535; expected 1024..65534 (the 2 task(s) take port, port+1"),
    # presets that do not exist (the groups were `optional`: silently ignored)
    ("experiment-option", ["experiment=scalling"],
     "experiment: received 'scalling' (did you mean scaling?); valid: batch_size, cassava_resnet50, "
     "cats_vs_dogs_mobilenetv2, custom_fashion_mnist, keras_mnist, scaling"),
    ("experiment-null", ["experiment=null"],
     "experiment: received null; valid: batch_size, cassava_resnet50, cats_vs_dogs_mobilenetv2, "),
    ("hparams-search-option", ["hparams_search=optune"],
     "hparams_search: received 'optune' (did you mean optuna?); valid: optuna"),
    # values TensorFlow/NumPy cannot take
    ("seed-negative", ["seed=-1"], "seed: received -1; expected 0..4294967295"),
    ("seed-too-large", ["seed=4294967296"], "seed: received 4294967296; expected 0..4294967295"),
    ("lr-inf", ["learning_rate=inf"], "learning_rate: received inf; expected a finite number"),
    ("lr-nan", ["learning_rate=nan"], "learning_rate: received nan; expected a finite number"),
    ("lr-zero", ["learning_rate=0"], "learning_rate: received 0.0; expected > 0"),
    ("model-lr-zero", ["model.learning_rate=0"], "model.learning_rate: received 0.0; expected > 0"),
    ("timeout-zero", ["timeout=0"], "timeout: received 0.0; expected seconds > 0"),
    ("multirun-and-cfg", ["--cfg", "job", "-m", "seed=0,1"],
     "command line: received two of -m/--multirun, --cfg, --info"),
    ("peer-start-timeout-zero", ["strategy=multiworker", "cluster=tf_config",
                                 "cluster.peer_start_timeout=0"],
     "cluster.peer_start_timeout: received 0.0; expected seconds > 0"),
    ("peer-start-timeout-inf", ["strategy=multiworker", "cluster=tf_config",
                                "cluster.peer_start_timeout=inf"],
     "cluster.peer_start_timeout: received inf; expected a finite number"),
    ("timeout-inf", ["timeout=inf"], "timeout: received inf; expected a finite number"),
    ("objective", ["objective=accuracy"], "objective: received 'accuracy'; valid: eval/accuracy"),
    ("precision", ["precision=fp8"], "precision: received 'fp8'; valid: float32"),
    ("progress", ["progress=fancy"], "progress: received 'fancy'; valid: auto, bar, lines, quiet"),
    ("steps-per-execution-zero", ["steps_per_execution=0"],
     "steps_per_execution: received 0; valid: auto or an integer >= 1"),
    ("target-accuracy", ["target_accuracy=1.5"], "target_accuracy: received 1.5; expected 0 < x <= 1"),
    ("gpus-negative", ["gpus=-1"], "gpus: received -1; expected >= 0"),
    ("global-batch-zero", ["global_batch_size=0"], "global_batch_size: received 0; expected >= 1"),
    ("log-every-negative", ["log_every_steps=-1"], "log_every_steps: received -1; expected >= 0"),
    ("prefetch", ["dataset.prefetch=-5"], "dataset.prefetch: received -5; expected >= -1"),
    ("shuffle-buffer-zero", ["dataset.shuffle_buffer=0"],
     "dataset.shuffle_buffer: received 0; expected >= 1"),
    ("checkpoint-keep-zero", ["checkpoint.keep=0"], "checkpoint.keep: received 0; expected >= 1"),
    ("checkpoint-every-negative", ["checkpoint.every_steps=-2"],
     "checkpoint.every_steps: received -2; expected >= 0"),
    # data smaller than one global batch
    ("synthetic-smaller-than-batch", ["dataset=synthetic", "dataset.size=10"],
     "dataset.size: received 10; dataset=synthetic has 10 training examples, fewer than one "
     "global batch (64)"),
    ("digits-smaller-than-batch", ["batch_size_per_replica=5000"],
     "batch_size_per_replica: received 5000; dataset=digits has 1437 training examples, fewer "
     "than one global batch (5000)"),
    # sizes this machine cannot hold (tests/helpers/servers.py: 2 cores here; the line gives the numbers)
    ("cpu-replicas-beyond-cores", ["cpu_replicas=1000"], "cpu_replicas: received 1000; this machine has "),
    ("workers-beyond-machine", ["strategy=multiworker", "workers=500"],
     "workers: received 500; cluster=local would start 500 TensorFlow processes (~700 MB each"),
    ("ps-beyond-machine", ["strategy=ps", "ps=300"],
     "ps: received 300; cluster=local would start 303 TensorFlow processes"),
    # a checkpoint directory that cannot be made (custom loop, checkpoints on)
    ("checkpoint-dir-under-file", ["checkpoint.dir={cwd}/afile/ckpt"],
     "checkpoint.dir: received '{cwd}/afile/ckpt'; {cwd}/afile is not a directory"),
    ("checkpoint-dir-is-file", ["checkpoint.dir={cwd}/afile"],
     "checkpoint.dir: received '{cwd}/afile'; {cwd}/afile is not a directory"),
    ("checkpoint-dir-not-creatable", ["checkpoint.dir=/proc/distexp-ckpt"],
     "checkpoint.dir: received '/proc/distexp-ckpt'; cannot create a directory in /proc"),
    # tracking keys
    ("tracking-experiment-empty", ["tracking.experiment=''"],
     "tracking.experiment: received ''; expected a non-empty MLflow experiment name"),
    ("tracking-uri-empty", ["tracking.uri=''"], "tracking.uri: received ''; expected a non-empty"),
    ("postgres-down", ["tracking.uri=postgresql://127.0.0.1:{port}/mlflow"],
     "tracking.uri: received 'postgresql://127.0.0.1:{port}/mlflow'; MLflow cannot be reached "
     "there ([Errno 111] Connection refused)"),
    ("postgres-without-driver", ["tracking.uri=postgresql://127.0.0.1:{port}/mlflow",
                                 "env:PYTHONPATH={root}/tests/helpers/nodriver:{root}:{root}/tests"],
     "tracking.uri: received 'postgresql://127.0.0.1:{port}/mlflow'; its database driver is not "
     "installed (no module named 'psycopg'); valid: pip install \"distexp[postgres]\""),
    # a typo in a user's function's keyword arguments: the function says so, named (trainer)
    ("dataset-kwargs-typo", ["dataset=custom", "dataset.factory=factories:blobs",
                             "+dataset.kwargs.nn=3", TRAINER],
     "dataset.factory: factories:blobs raised TypeError"),
]


# Through a real subprocess as well (tests/cli/test_bad_inputs_cli.py): one case per way the line is
# made, plus every case that needs a process of its own (TRAINER; a PYTHONPATH without the driver).
CLI = {"strategy-option", "epochs-type", "sweep-alpha-without-auto", "gpus-beyond-visible", "outputs-unwritable",
       "tracking-server-down", "postgres-without-driver"}


def case(cwd, args, expected):
    """(the command's args, its environment, the expected start of the line) for a table row."""
    (cwd / "afile").write_text("a file where a directory is expected\n")
    fill = {"cwd": str(cwd), "port": str(free_port()), "root": str(ROOT)}
    env = {"CUDA_VISIBLE_DEVICES": ""}
    env.update(a[4:].split("=", 1) for a in args if a.startswith("env:"))
    if "PYTHONPATH" in env:
        env["PYTHONPATH"] = env["PYTHONPATH"].format(**fill)
    args = [a if "TF_CONFIG" in a else a.format(**fill) for a in args
            if a != TRAINER and not a.startswith("env:")]
    expected = expected.format(**fill) if re.search(r"\{(cwd|port|root)\}", expected) \
        else expected
    args.append("epochs=1" if not any(a.startswith("epochs") for a in args) else "seed=0")
    return args, env, expected


def assert_one_line(r, expected):
    assert r.returncode == 2, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r
    line = lines[0]
    assert line.startswith(f"distexp: error: {expected}"), r
    key = expected.split(":")[0]
    # the key, what was received, what is valid: spelled out per case in `expected`; the few that
    # say it otherwise ("needs", "try", "use", a user function that raised) are checked there too
    assert re.match(rf"distexp: error: {re.escape(key)}: (received |unknown key|factories:)", line)
    assert "Traceback" not in r.out
